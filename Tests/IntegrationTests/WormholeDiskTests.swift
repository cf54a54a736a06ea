import DarwinNotify
import Foundation
import Testing
import Wormhole

/// A wormhole on disk (synced): `file` passes through the prepared spare file (SpareFile.swift),
/// `queue` passes synced in groups and announced after their sync (GroupCommit.swift).
extension IntegrationSuites {
    @Suite("Wormhole on disk", .serialized)
    struct WormholeDiskTests {
        let fixture: WormholeFixture
        init() throws { fixture = try WormholeFixture() }

        var messagesPath: String { fixture.root + "/group.test/wormhole/messages" }

        /// The files in the wormhole's `messages/`, dot names included.
        func messageFiles() throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: messagesPath).sorted()
        }

        /// The files in `messages/` but this process's spare: the message it replaced last, kept
        /// under its `.tmp-<pid>-` name to be written again (SpareFile.swift). At most one.
        func messageFilesButOurSpare() throws -> [String] {
            let all = try messageFiles()
            let spares = all.filter { $0.hasPrefix(".tmp-\(getpid())-") }
            #expect(spares.count <= 1, "\(spares)")
            return all.filter { !spares.contains($0) }
        }

        func inode(_ path: String) -> UInt64? {
            var info = stat()
            return lstat(path, &info) == 0 ? UInt64(info.st_ino) : nil
        }

        @Test("file on disk: passes of every size, smaller and larger than the spare, each read whole by another process; messages/ holds only the message afterwards")
        func filePassesThroughTheSpare() throws {
            #expect(!wormholeStorageIsInMemory(fixture.root), "the fixture's root must be on a disk for this test to sync")
            let wormhole = try fixture.wormhole()
            // 1 KiB, then smaller, larger, the same again, one over the spare's 64 KiB limit (the
            // plain path), then small again (a spare of the large size, truncated), then empty.
            for size in [1024, 10, 60_000, 1024, 70_000, 100, 0, 1024] {
                let text = String(repeating: "x", count: size)
                try wormhole.pass(text, identifier: "sized")
                #expect(try wormhole.message("sized", as: String.self) == text, "size \(size), read here")
                let read = try fixture.cliOK(["read", "group.test", "sized"])
                #expect(read == "\"\(text)\"\n", "size \(size), read by the wormhole tool: \(read.count) bytes")
            }
            #expect(try messageFilesButOurSpare() == ["sized"])
        }

        @Test("file on disk: the message a pass replaced is written again by the next pass (no new file), and its name goes when the process exits")
        func replacedMessageIsReused() throws {
            let wormhole = try fixture.wormhole()
            let message = messagesPath + "/reused"
            var inodes: [UInt64] = []
            for i in 0..<6 {
                try wormhole.pass(i, identifier: "reused")
                #expect(try wormhole.message("reused", as: Int.self) == i)
                inodes.append(try #require(inode(message)))
                // From the second pass on, the replaced message is this process's spare.
                if i >= 1 {
                    let files = try messageFiles()
                    let spare = files.filter { $0.hasPrefix(".tmp-\(getpid())-") }
                    #expect(spare.count == 1 && inode(messagesPath + "/" + spare[0]) == inodes[i - 1],
                            "pass \(i): \(files), inodes \(inodes)")
                }
            }
            // The first pass makes the message, the second writes the spare made after it, and
            // from then on the two files take turns.
            #expect(inodes[2] == inodes[0] && inodes[3] == inodes[1] && inodes[4] == inodes[2], "\(inodes)")
            // Another process: coordinated updates go through the same spares, and its exit
            // removes its spare's name.
            let result = try run("wormhole-probe", ["increment", "group.test", "counted", "5"], environment: fixture.environment)
            #expect(result.status == 0, "\(result.err)")
            #expect(try wormhole.message("counted", as: [String: Int].self) == ["count": 5])
            #expect(try messageFilesButOurSpare() == ["counted", "reused"])
        }

        @Test("file on disk: a replaced message that a reader still holds open is never written again: the reader reads it whole after later passes")
        func heldMessageIsNotReused() throws {
            let wormhole = try fixture.wormhole()
            let first = String(repeating: "1", count: 1000)
            try wormhole.pass(first, identifier: "held")
            // A reader opens the message, as a listener does, and is slow to read it.
            let fd = open(messagesPath + "/held", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
            #expect(fd >= 0)
            defer { close(fd) }
            // The next pass replaces it (it becomes the spare), the one after would write it.
            for n in 2...4 {
                try wormhole.pass(String(repeating: "\(n)", count: 1000), identifier: "held")
                #expect(try wormhole.message("held", as: String.self) == String(repeating: "\(n)", count: 1000))
            }
            var bytes = [UInt8](repeating: 0, count: 4096)
            let count = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
            let text = String(decoding: bytes[0..<max(0, count)], as: UTF8.self)
            #expect(text.hasPrefix("DNWH1 ") && text.hasSuffix("\"" + first + "\""),
                    "the held file now reads \(count) bytes: \(text.prefix(80))…\(text.suffix(20))")
            #expect(try messageFilesButOurSpare() == ["held"])
        }

        @Test("file on disk: a directory someone made at a message's path fails the pass, as before, and stays where it is with what it holds (never exchanged away under a hidden name)")
        func directoryAtMessagePath() throws {
            let wormhole = try fixture.wormhole()
            try wormhole.pass(1, identifier: "other") // the container, and a spare for the next pass
            let path = fixture.root + "/group.test/wormhole/messages/taken"
            try FileManager.default.createDirectory(atPath: path + "/inside", withIntermediateDirectories: true)
            #expect(throws: WormholeError.self) { try wormhole.pass(2, identifier: "taken") }
            #expect(FileManager.default.fileExists(atPath: path + "/inside"))
            #expect(try messageFiles() == ["other", "taken"])
        }

        struct Tick: Codable, Sendable { var t: Int; var i: Int }

        @Test("file on disk: a listener in another process gets 200 passes from two threads, each at most once, the last one last; no temporary file stays")
        func fileConcurrentPasses() throws {
            let listener = try fixture.listener(["listen", "group.test", "race"])
            let wormhole = try fixture.wormhole()
            DispatchQueue.concurrentPerform(iterations: 2) { thread in
                for i in 0..<100 { #expect(throws: Never.self) { try wormhole.pass(Tick(t: thread, i: i), identifier: "race") } }
            }
            try wormhole.pass(Tick(t: 9, i: 999), identifier: "race")
            // The tool prints each payload as JSON, keys in any order: compared as values.
            _ = try listener.waitForLine { $0.contains("999") }
            listener.kill(SIGTERM)
            let ticks = listener.lines.compactMap { try? JSONDecoder().decode(Tick.self, from: Data($0.utf8)) }
            #expect(ticks.count == listener.lines.count, "\(listener.lines.prefix(3))")
            #expect(ticks.last.map { [$0.t, $0.i] } == [9, 999])
            #expect(Set(ticks.map { $0.t * 1000 + $0.i }).count == ticks.count, "a message came twice")
            #expect(try messageFilesButOurSpare() == ["race"])
        }

        @Test("queue on disk: 500 passes return before their sync, and a listener in another process is told of every one, in order; flush() returns once all are announced")
        func queueGroupCommit() throws {
            let listener = try fixture.listener(["--transiting", "queue", "listen", "group.test", "batch", "--count", "500"])
            let queue = try fixture.wormhole(transiting: .queue)
            for i in 0..<500 { try queue.pass(i, identifier: "batch") }
            try queue.flush()
            #expect(try listener.waitForExit() == 0)
            #expect(listener.lines == (0..<500).map(String.init))
            // Unnamed files, linked under their sequence: no temporary name is left in the queue.
            let names = try FileManager.default.contentsOfDirectory(atPath: fixture.root + "/group.test/wormhole/queues/batch")
            #expect(names.filter { $0.hasPrefix(".tmp") }.isEmpty, "\(names.filter { $0.hasPrefix(".") })")
        }

        @Test("queue on disk: the wormhole tool's pass is announced before it exits, so a running listener gets it")
        func queueToolPassIsAnnounced() throws {
            let listener = try fixture.listener(["--transiting", "queue", "listen", "group.test", "tool", "--count", "3"])
            for n in 1...3 { try fixture.cliOK(["--transiting", "queue", "pass", "group.test", "tool", "\(n)"]) }
            #expect(try listener.waitForExit() == 0)
            #expect(listener.lines == ["1", "2", "3"])
        }
    }
}

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

        /// The files in the wormhole's `messages/`, dot names included.
        func messageFiles() throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: fixture.root + "/group.test/wormhole/messages").sorted()
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
            #expect(try messageFiles() == ["sized"])
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
            #expect(try messageFiles() == ["race"])
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

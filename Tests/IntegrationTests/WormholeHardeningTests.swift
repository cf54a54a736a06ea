import Foundation
import Testing
import Wormhole

/// Hostile or broken files in a container: a FIFO, a link or a directory where a message or a
/// cursor should be, a message over the reader's limit, a queue removed under its listener, and
/// containers or subdirectories others may write.
extension IntegrationSuites {
    @Suite("Hardening: wormhole files", .serialized)
    struct WormholeHardeningTests {
        let fixture: WormholeFixture
        init() throws { fixture = try WormholeFixture() }

        var base: String { fixture.root + "/group.test/wormhole" }

        @Test("the mount table is read to its end: a file system mounted in a tmpfs behind more than a page of /proc/self/mountinfo is not taken for memory (its messages are synced), and the last tmpfs is")
        func mountTableReadToItsEnd() throws {
            #expect(geteuid() == 0, "this test mounts file systems in a mount namespace of its own (unshare -m): run as root")
            guard geteuid() == 0 else { return }
            let root = try makeTemporaryDirectory("mounts")
            defer { try? FileManager.default.removeItem(atPath: root) }
            // In a mount namespace of its own (gone with the process): a tmpfs, 120 small tmpfs
            // inside it (some 13 KB of mountinfo past the test's own), then a file system that is
            // not in memory (mqueue stands in for a disk) mounted last, inside the tmpfs.
            let script = """
                set -e
                mount --make-rprivate /
                mount -t tmpfs -o size=1m tmpfs "$1"
                mkdir "$1/disk"
                for i in $(seq 1 120); do mkdir "$1/p$i"; mount -t tmpfs -o size=4k tmpfs "$1/p$i"; done
                mount -t mqueue mqueue "$1/disk"
                [ "$(wc -c < /proc/self/mountinfo)" -gt 8192 ]
                exec "$2" in-memory "$1/disk" "$1/p120" "$1/p1"
                """
            let result = try run("/usr/bin/unshare", ["-m", "--", "/bin/sh", "-c", script, "sh", root,
                                                      ChildProcess.productsDirectory + "/wormhole-probe"])
            #expect(result.status == 0, "\(result)")
            #expect(result.out == "\(root)/disk false\n\(root)/p120 true\n\(root)/p1 true\n", "\(result)")
        }

        @Test("a FIFO as a message: read returns with an error, and a listener delivers the next pass")
        func fifoMessageDoesNotHang() throws {
            try fixture.cliOK(["pass", "group.test", "other", "0"]) // makes the container
            #expect(mkfifo(base + "/messages/id1", 0o600) == 0)
            let read = try fixture.cli(["read", "group.test", "id1"], timeout: 10)
            #expect(read.status != 0 && read.err.contains("FIFO"), "\(read)")
            #expect(!FileManager.default.fileExists(atPath: base + "/messages/id1"), "the FIFO was not moved aside")
            #expect(mkfifo(base + "/messages/id1", 0o600) == 0)
            let listener = try fixture.listener(["listen", "group.test", "id1", "--count", "1"])
            try fixture.cliOK(["pass", "group.test", "id1", "{\"after\":1}"])
            try listener.waitForLine("{\"after\":1}")
            #expect(try listener.waitForExit(timeout: 10) == 0)
        }

        @Test("a FIFO as a queue cursor does not block passes; its listener reports it and recovers")
        func fifoCursorDoesNotBlockWriters() throws {
            try fixture.cliOK(["--transiting", "queue", "pass", "group.test", "q", "1"])
            #expect(mkfifo(base + "/queues/q/.cursors/evil", 0o600) == 0)
            let pass = try fixture.cli(["--transiting", "queue", "pass", "group.test", "q", "2"], timeout: 10)
            #expect(pass.status == 0, "\(pass)")
            let listen = try fixture.cli(["--transiting", "queue", "listen", "--name", "evil", "group.test", "q", "--count", "1"], timeout: 10)
            #expect(listen.status == 0 && listen.err.contains("damagedCursor") && listen.err.contains("not a regular file"), "\(listen)")
            #expect(listen.out == "1\n", "resumed at the oldest kept message: \(listen)")
        }

        @Test("a queue message whose record is damaged, whose entry is damaged or that is over the reader's limit is reported and skipped (a damaged record's bytes copied to quarantine), and the listener goes on")
        func badQueueMessagesAreReported() throws {
            for i in 1 ... 4 { try fixture.cliOK(["--transiting", "queue", "pass", "group.test", "q", "{\"n\":\(i)}"]) }
            let big = "\"" + String(repeating: "x", count: 3000) + "\""
            try fixture.cliOK(["--transiting", "queue", "pass", "group.test", "q", big]) // 5: fine for its writer
            try fixture.cliOK(["--transiting", "queue", "pass", "group.test", "q", "{\"n\":6}"])
            try fixture.cliOK(["--transiting", "queue", "pass", "group.test", "q", "{\"n\":7}"])
            let segment = base + "/queues/q/" + WormholeTestSupport.segmentName(first: 1)
            let (messages, _) = try WormholeTestSupport.segmentMessages(base + "/queues/q")
            #expect(messages.keys.sorted() == [1, 2, 3, 4, 5, 6, 7])
            var bytes = try Data(contentsOf: URL(fileURLWithPath: segment))
            // Record 2: its payload's last byte changed (its checksum no longer holds).
            let entry2 = bytes.subdata(in: 32 ..< 64)
            let end2 = entry2.withUnsafeBytes { Int($0.loadUnaligned(fromByteOffset: 0, as: UInt64.self)) + Int($0.loadUnaligned(fromByteOffset: 8, as: UInt32.self)) }
            bytes[end2 - 2] ^= 0x01
            // Entry 3: its check changed.
            bytes[2 * 32 + 24] ^= 0xFF
            // Entry 4: a good check over an offset far past any file (and past what a signed
            // offset holds), as a hostile member of the group could write.
            bytes.replaceSubrange(3 * 32 ..< 4 * 32, with: WormholeTestSupport.segmentEntry(
                offset: 0xFFFF_FFFF_FFFF_FF00, length: 200, nanoseconds: 1_732_291_200_000_000_000, sequence: 4))
            try bytes.write(to: URL(fileURLWithPath: segment))
            let listener = try ChildProcess("wormhole", ["--transiting", "queue", "--max-payload", "100", "listen", "--name", "reader",
                                                         "group.test", "q", "--count", "3"], environment: fixture.environment)
            #expect(try listener.waitForExit(timeout: 20) == 0, "stderr: \(listener.stderr)")
            #expect(listener.lines == ["{\"n\":1}", "{\"n\":6}", "{\"n\":7}"], "\(listener.lines) \(listener.stderr)")
            for what in ["queue message 2 of 'q' is damaged (payload checksum mismatch)", "queue message 3 of 'q': its entry",
                         "queue message 4 of 'q': its entry", "queue message 5 of 'q' is 30", "over this reader's limit"] {
                #expect(listener.stderr.contains(what), "no report of \(what): \(listener.stderr)")
            }
            let quarantined = try FileManager.default.contentsOfDirectory(atPath: base + "/quarantine/q")
            #expect(quarantined.count == 1 && quarantined[0].hasSuffix("-2"), "\(quarantined)")
            // Readers leave the segment as it is; the next pass removes what the listener passed,
            // the damaged entry too, and appends.
            let read = try WormholeTestSupport.segmentMessages(base + "/queues/q")
            #expect(read.damaged == [3, 4] && read.messages.keys.sorted() == [1, 2, 5, 6, 7], "\(read.damaged) \(read.messages.keys.sorted())")
            try fixture.cliOK(["--transiting", "queue", "pass", "group.test", "q", "{\"n\":8}"])
            let after = try WormholeTestSupport.segmentMessages(base + "/queues/q")
            #expect(after.damaged.isEmpty && after.messages.keys.sorted() == [8], "\(after.damaged) \(after.messages.keys.sorted())")
        }

        @Test("a queue segment that is a link, a FIFO or a directory is moved to quarantine by the reader that finds it (reported) and by the writer that finds it (which makes a new one); nothing hangs and later messages arrive")
        func badQueueSegmentsAreQuarantined() throws {
            let queue = base + "/queues/s"
            for (n, make) in [(1, "link"), (2, "fifo"), (3, "directory")].enumerated().map({ ($0.offset, $0.element.1) }) {
                // A message, then its segment replaced by something else.
                try fixture.cliOK(["--transiting", "queue", "pass", "group.test", "s", "{\"round\":\(n)}"])
                let segment = queue + "/" + WormholeTestSupport.segmentName(first: 1)
                try FileManager.default.removeItem(atPath: segment)
                switch make {
                case "link": try FileManager.default.createSymbolicLink(atPath: segment, withDestinationPath: "/etc/passwd")
                case "fifo": #expect(mkfifo(segment, 0o600) == 0)
                default: try FileManager.default.createDirectory(atPath: segment, withIntermediateDirectories: false)
                }
                // A reader finds it first.
                let read = try fixture.cli(["--transiting", "queue", "read", "group.test", "s"], timeout: 10)
                #expect(read.status != 0 && read.err.contains("not a segment file"), "\(make): \(read)")
                // Made again by the test, then a writer finds it.
                switch make {
                case "link": try FileManager.default.createSymbolicLink(atPath: segment, withDestinationPath: "/etc/passwd")
                case "fifo": #expect(mkfifo(segment, 0o600) == 0)
                default: try FileManager.default.createDirectory(atPath: segment, withIntermediateDirectories: false)
                }
                try fixture.cliOK(["--transiting", "queue", "pass", "group.test", "s", "{\"after\":\(n)}"])
                let read2 = try fixture.cli(["--transiting", "queue", "read", "group.test", "s"], timeout: 10)
                #expect(read2.status == 0 && read2.out == "{\"after\":\(n)}\n", "\(make): \(read2)")
                var info = stat()
                #expect(lstat(segment, &info) == 0 && info.st_mode & S_IFMT == S_IFREG, "\(make): the writer made a new segment")
            }
            let quarantined = try FileManager.default.contentsOfDirectory(atPath: base + "/quarantine/s")
            #expect(quarantined.count == 6, "\(quarantined)")
        }

        @Test("a queue written by a version before segments (one file per message) is still read, and its bad files are quarantined")
        func oldQueueFilesAreRead() throws {
            let queue = base + "/queues/old"
            try FileManager.default.createDirectory(atPath: queue + "/.cursors", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            for path in [fixture.root + "/group.test", base, base + "/queues"] { chmod(path, 0o700) }
            var total = 0
            let file = { (n: Int) in queue + "/" + String(repeating: "0", count: 19) + String(n) }
            for n in 1 ... 4 {
                let payload = Data("{\"n\":\(n)}".utf8)
                let line = "DNWH1 00000000-0000-4000-8000-00000000000\(n) json \(payload.count) \(WormholeTestSupport.checksum(payload)) 1732291200.000000 1\n"
                total += line.utf8.count + payload.count
                try (Data(line.utf8) + payload).write(to: URL(fileURLWithPath: file(n)))
            }
            try FileManager.default.removeItem(atPath: file(2))
            try FileManager.default.createSymbolicLink(atPath: file(2), withDestinationPath: "/etc/passwd")
            try FileManager.default.removeItem(atPath: file(3))
            try FileManager.default.createDirectory(atPath: file(3), withIntermediateDirectories: false)
            let state = [UInt64(5), 1, UInt64(total), 0x5eed].map(WormholeTestSupport.littleEndian).reduce(Data(), +)
            try state.write(to: URL(fileURLWithPath: queue + "/.state"))
            let listener = try fixture.cli(["--transiting", "queue", "listen", "--name", "reader", "group.test", "old", "--count", "2"], timeout: 20)
            #expect(listener.status == 0 && listener.out == "{\"n\":1}\n{\"n\":4}\n", "\(listener)")
            for what in ["a symbolic link", "a directory"] {
                #expect(listener.err.contains(what), "no report of \(what): \(listener.err)")
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: base + "/quarantine/old").count == 2)
        }

        @Test("a queue removed under a running named listener: reported, and every later message delivered")
        func queueRemovedUnderListener() throws {
            let listener = try fixture.listener(["--transiting", "queue", "listen", "--name", "l", "group.test", "q1"])
            for i in 1 ... 10 { try fixture.cliOK(["--transiting", "queue", "pass", "group.test", "q1", "\(i)"]) }
            try listener.waitForLine("10")
            try FileManager.default.removeItem(atPath: base + "/queues/q1")
            for i in 11 ... 13 { try fixture.cliOK(["--transiting", "queue", "pass", "group.test", "q1", "\(i)"]) }
            try listener.waitForLine("13", timeout: 20)
            #expect(listener.lines.suffix(3) == ["11", "12", "13"], "\(listener.lines)")
            #expect(listener.stderr.contains("was removed and made again"), "\(listener.stderr)")
            // Its cursor lives in the new queue: a second process cannot take the name meanwhile.
            let rival = try fixture.cli(["--transiting", "queue", "listen", "--name", "l", "group.test", "q1", "--count", "1"], timeout: 10)
            #expect(rival.status != 0 && rival.err.contains("already listening"), "\(rival)")
            listener.kill(SIGTERM)
            _ = try? listener.waitForExit(timeout: 10)
        }

        @Test("a shared container opened without --share-with-group says so; a world-writable subdirectory is refused")
        func containerMessages() throws {
            let shared = try fixture.cli(["--share-with-group", "root", "pass", "group.shared", "id", "1"])
            #expect(shared.status == 0, "\(shared)")
            let plain = try fixture.cli(["read", "group.shared", "id"])
            #expect(plain.status != 0 && plain.err.contains("--share-with-group root"), "\(plain)")

            try fixture.cliOK(["pass", "group.test", "id", "1"])
            #expect(chmod(base + "/messages", 0o777) == 0)
            let open = try fixture.cli(["read", "group.test", "id"])
            #expect(open.status != 0 && open.err.contains("writable by every user") && open.err.contains("messages"), "\(open)")
        }
    }
}

/// A queue written by another implementation exactly as docs/PROTOCOL.md says (the format computed
/// by the test, not by the Wormhole module) is read by `wormhole`: the page is enough to interoperate.
extension IntegrationSuites {
    @Suite("Wormhole files written from the protocol page", .serialized)
    struct WormholeProtocolInteropTests {
        let fixture: WormholeFixture
        init() throws { fixture = try WormholeFixture() }

        @Test("a queue segment made by hand from docs/PROTOCOL.md is delivered in order by a named listener, and a pass appends to it")
        func handMadeQueue() throws {
            let queue = fixture.root + "/group.test/wormhole/queues/jobs"
            try FileManager.default.createDirectory(atPath: queue + "/.cursors", withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
            for path in [fixture.root + "/group.test", fixture.root + "/group.test/wormhole", fixture.root + "/group.test/wormhole/queues"] {
                chmod(path, 0o700)
            }
            // Three messages, 1 to 3, in the segment of 1…256 (…0001.seg), as a foreign writer makes
            // them: an index of 256 entries of 32 bytes, then the records. .state counts two: the
            // writer of 3 died after writing its entry.
            var index = Data(count: 8192), records = Data()
            for (n, json) in [(1, "{\"job\":1}"), (2, "{\"job\":2}"), (3, "{\"job\":3}")] {
                let payload = Data(json.utf8)
                let line = "DNWH1 00000000-0000-4000-8000-00000000000\(n) json \(payload.count) \(WormholeTestSupport.checksum(payload)) 1732291200.000000 1\n"
                let record = Data(line.utf8) + payload
                let entry = WormholeTestSupport.segmentEntry(offset: UInt64(8192 + records.count), length: UInt32(record.count),
                                                             nanoseconds: 1_732_291_200_000_000_000, sequence: UInt64(n))
                index.replaceSubrange(32 * (n - 1) ..< 32 * n, with: entry)
                records += record
            }
            let total = records.count * 2 / 3
            let segment = queue + "/" + WormholeTestSupport.segmentName(first: 1)
            try (index + records).write(to: URL(fileURLWithPath: segment))
            chmod(segment, 0o600)
            // .state: head 3 (next to assign), tail 1, bytes of the records, a generation.
            var state = Data()
            for word in [UInt64(3), 1, UInt64(total), 0x5eed] { withUnsafeBytes(of: word.littleEndian) { state.append(contentsOf: $0) } }
            try state.write(to: URL(fileURLWithPath: queue + "/.state"))
            chmod(queue + "/.state", 0o600)
            let listener = try fixture.cli(["--transiting", "queue", "listen", "--name", "worker", "group.test", "jobs", "--count", "3"])
            #expect(listener.status == 0, "\(listener)")
            #expect(listener.out == "{\"job\":1}\n{\"job\":2}\n{\"job\":3}\n", "\(listener)")
            // And a pass keeps 3 (counts it) and appends after it, as message 4, in the same segment.
            try fixture.cliOK(["--transiting", "queue", "pass", "group.test", "jobs", "{\"job\":4}"])
            let (messages, damaged) = try WormholeTestSupport.segmentMessages(queue)
            // (1 and 2, read by the only named listener, were removed by that pass; 3 was counted
            // only after its retention, and goes at the next.)
            #expect(damaged.isEmpty && messages.keys.sorted() == [3, 4], "\(messages.keys.sorted()) \(damaged)")
            #expect(messages[4].map { String(decoding: $0, as: UTF8.self).hasSuffix("\n{\"job\":4}") } == true)
            let saved = try Data(contentsOf: URL(fileURLWithPath: queue + "/.state"))
            #expect(saved.prefix(8) == WormholeTestSupport.littleEndian(UInt64(5)), "head is 5: \(Array(saved))")
        }
    }
}

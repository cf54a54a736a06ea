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

        @Test("a queue message that is a link, a directory or over the reader's limit is quarantined and the listener goes on")
        func badQueueMessagesAreQuarantined() throws {
            for i in 1 ... 4 { try fixture.cliOK(["--transiting", "queue", "pass", "group.test", "q", "{\"n\":\(i)}"]) }
            let big = "\"" + String(repeating: "x", count: 3000) + "\""
            try fixture.cliOK(["--transiting", "queue", "pass", "group.test", "q", big]) // 5: fine for its writer
            try fixture.cliOK(["--transiting", "queue", "pass", "group.test", "q", "{\"n\":6}"])
            let file = { (n: Int) in self.base + "/queues/q/" + String(repeating: "0", count: 19) + String(n) }
            try FileManager.default.removeItem(atPath: file(2))
            try FileManager.default.createSymbolicLink(atPath: file(2), withDestinationPath: "/etc/passwd")
            try FileManager.default.removeItem(atPath: file(3))
            try FileManager.default.createDirectory(atPath: file(3), withIntermediateDirectories: false)
            let listener = try ChildProcess("wormhole", ["--transiting", "queue", "--max-payload", "100", "listen", "--name", "reader",
                                                         "group.test", "q", "--count", "3"], environment: fixture.environment)
            #expect(try listener.waitForExit(timeout: 20) == 0, "stderr: \(listener.stderr)")
            #expect(listener.lines == ["{\"n\":1}", "{\"n\":4}", "{\"n\":6}"], "\(listener.lines) \(listener.stderr)")
            for what in ["a symbolic link", "a directory", "over this reader's limit"] {
                #expect(listener.stderr.contains(what), "no report of \(what): \(listener.stderr)")
            }
            let quarantined = try FileManager.default.contentsOfDirectory(atPath: base + "/quarantine/q")
            #expect(quarantined.count == 3, "\(quarantined)")
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

        @Test("a queue made by hand from docs/PROTOCOL.md is delivered in order by a named listener")
        func handMadeQueue() throws {
            let queue = fixture.root + "/group.test/wormhole/queues/jobs"
            try FileManager.default.createDirectory(atPath: queue + "/.cursors", withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
            for path in [fixture.root + "/group.test", fixture.root + "/group.test/wormhole", fixture.root + "/group.test/wormhole/queues"] {
                chmod(path, 0o700)
            }
            // Two messages, 1 and 2 (the first file is …0001), as a foreign writer makes them.
            var total = 0
            for (n, json) in [(1, "{\"job\":1}"), (2, "{\"job\":2}")] {
                let payload = Data(json.utf8)
                let line = "DNWH1 00000000-0000-4000-8000-00000000000\(n) json \(payload.count) \(WormholeTestSupport.checksum(payload)) 1732291200.000000 1\n"
                let file = Data(line.utf8) + payload
                total += file.count
                let name = String(repeating: "0", count: 19) + String(n)
                try file.write(to: URL(fileURLWithPath: queue + "/" + name))
                chmod(queue + "/" + name, 0o600)
            }
            // .state: head 3 (next to assign), tail 1, bytes of the whole files, a generation.
            var state = Data()
            for word in [UInt64(3), 1, UInt64(total), 0x5eed] { withUnsafeBytes(of: word.littleEndian) { state.append(contentsOf: $0) } }
            try state.write(to: URL(fileURLWithPath: queue + "/.state"))
            chmod(queue + "/.state", 0o600)
            let listener = try fixture.cli(["--transiting", "queue", "listen", "--name", "worker", "group.test", "jobs", "--count", "2"])
            #expect(listener.status == 0, "\(listener)")
            #expect(listener.out == "{\"job\":1}\n{\"job\":2}\n", "\(listener)")
            // And a pass appends after them, as message 3.
            try fixture.cliOK(["--transiting", "queue", "pass", "group.test", "jobs", "{\"job\":3}"])
            #expect(FileManager.default.fileExists(atPath: queue + "/" + String(repeating: "0", count: 19) + "3"))
        }
    }
}

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

        @Test("a FIFO as a queue cursor does not block passes")
        func fifoCursorDoesNotBlockWriters() throws {
            try fixture.cliOK(["--transiting", "queue", "pass", "group.test", "q", "1"])
            #expect(mkfifo(base + "/queues/q/.cursors/evil", 0o600) == 0)
            let pass = try fixture.cli(["--transiting", "queue", "pass", "group.test", "q", "2"], timeout: 10)
            #expect(pass.status == 0, "\(pass)")
            let listen = try fixture.cli(["--transiting", "queue", "listen", "--name", "evil", "group.test", "q", "--count", "1"], timeout: 10)
            #expect(listen.status != 0 && listen.err.contains("not a regular file"), "\(listen)")
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

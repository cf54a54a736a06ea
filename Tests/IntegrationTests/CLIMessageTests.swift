import Foundation
import Testing

/// What the CLIs say when something is off: always right, always actionable, never harmful, and
/// in the form scripts can rely on (exit statuses).
extension IntegrationSuites {
    @Suite("CLI messages", .serialized)
    struct CLIMessageTests {
        let fixture: WormholeFixture
        init() throws { fixture = try WormholeFixture() }

        @Test("notifyutil --bus-status exits 0 when running and 3 when stopped; --bus-stop of a stopped bus: 0, 'not running'")
        func busStatusExitCodes() throws {
            let runtime = try makeTemporaryDirectory("status")
            chmod(runtime, 0o700)
            let env = ["XDG_RUNTIME_DIR": runtime, "DARWIN_NOTIFY_BUS": "embedded"]
            defer { _ = try? run("notifyutil", ["--bus-stop"], environment: env) }
            let stopped = try run("notifyutil", ["--bus-status"], environment: env)
            #expect(stopped.status == 3 && stopped.out.hasPrefix("stopped "), "\(stopped)")
            let stop = try run("notifyutil", ["--bus-stop"], environment: env)
            #expect(stop.status == 0 && stop.out == "not running\n" && stop.err.isEmpty, "\(stop)")
            #expect(try run("notifyutil", ["--bus-start"], environment: env).status == 0)
            let running = try run("notifyutil", ["--bus-status"], environment: env)
            #expect(running.status == 0 && running.out.hasPrefix("running "), "\(running)")
        }

        @Test("notifyutil names a name briefly: an empty one quoted, a 513-byte one cut short")
        func namesInMessages() throws {
            let empty = try run("notifyutil", ["-z", "0", "-p", ""], environment: fixture.bus.environment)
            #expect(empty.status == 1 && empty.err.hasPrefix("notifyutil: -p '': Invalid Name"), "\(empty)")
            #expect(!empty.err.contains("notifyutil: : "))
            let long = String(repeating: "n", count: 513)
            let tooLong = try run("notifyutil", ["-z", "0", "-p", long], environment: fixture.bus.environment)
            #expect(tooLong.status == 1 && tooLong.err.contains("(513 bytes)") && !tooLong.err.contains(long), "\(tooLong.err.count) bytes")
            #expect(tooLong.err.utf8.count < 300, "\(tooLong.err)")
        }

        @Test("the CLIs print the version")
        func versions() throws {
            let version = try String(contentsOfFile: BuildSuites.InstallTests.root + "/VERSION", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(try run("notifyutil", ["--version"]).out == "notifyutil (DarwinNotify) \(version)\n")
            #expect(try run("wormhole", ["--version"]).out == "wormhole (DarwinNotify) \(version)\n")
            #expect(try run("distnotify", ["--version"]).out == "distnotify (DarwinNotify) \(version)\n")
        }

        @Test("distnotify: a usage error is one line with exit 64, a bad userInfo names the byte, a post with no bus says so with exit 1")
        func distnotifyMessages() throws {
            for (args, text) in [([String](), "no command given"), (["post"], "post needs a NAME"), (["frob"], "unknown command 'frob'"),
                                 (["watch", "--count", "0"], "--count takes a positive number"), (["post", "x", "--json"], "--json and --count are for watch"),
                                 (["post", "x", "-u", "{\"a\":}"], "not valid JSON at byte"), (["post", "x", "-u", "{\"a\":null}"], "null has no property-list form")] {
                let r = try run("distnotify", args)
                #expect(r.status == 64, "\(args): \(r)")
                #expect(r.err.hasPrefix("distnotify: ") && r.err.contains(text) && r.err.split(separator: "\n").count == 1, "\(args): \(r.err)")
            }
            let nobus = try run("distnotify", ["post", "x", "--bus", "unix:path=/nonexistent/bus"])
            #expect(nobus.status == 1 && nobus.err.contains("not posted") && nobus.err.contains("/nonexistent/bus"), "\(nobus)")
        }

        @Test("wormhole read, list and clear of a group never used: 'no container', and nothing is created")
        func neverUsedGroup() throws {
            for args in [["read", "group.never", "id"], ["list", "group.never"], ["clear", "group.never", "id"], ["clear-all", "group.never"]] {
                let r = try fixture.cli(args)
                #expect(r.status != 0 && r.err.contains("no container for group 'group.never'"), "\(args): \(r)")
            }
            #expect(!FileManager.default.fileExists(atPath: fixture.root + "/group.never"))
            let missing = fixture.root + "/not-made"
            let explicit = try fixture.cli(["--container", missing, "read", "group.x", "id"])
            #expect(explicit.status != 0 && explicit.err.contains("--container \(missing) does not exist"), "\(explicit)")
            #expect(!FileManager.default.fileExists(atPath: missing))
        }

        @Test("wormhole listen on a group with no container says it waits for the first pass, then delivers it")
        func listenBeforeFirstPass() throws {
            let listener = try fixture.listener(["listen", "group.later", "id", "--count", "1"])
            #expect(listener.stderr.contains("no container for group 'group.later' yet: waiting for the first pass"), "\(listener.stderr)")
            try fixture.cliOK(["pass", "group.later", "id", "{\"first\":true}"])
            try listener.waitForLine("{\"first\":true}")
        }

        @Test("--container /tmp is refused without advising chmod on /tmp; an unwritable HOME names the way out")
        func harmlessAdvice() throws {
            let tmp = try fixture.cli(["--container", "/tmp", "read", "group.x", "id"])
            #expect(tmp.status != 0 && !tmp.err.contains("chmod") && tmp.err.contains("a directory of your own"), "\(tmp)")
            let home = try run("wormhole", ["pass", "group.x", "id", "1"],
                               environment: fixture.bus.environment.merging(["HOME": "/proc/no-home", "XDG_DATA_HOME": "", "DARWIN_NOTIFY_CONTAINER_ROOT": ""]) { $1 })
            #expect(home.status != 0 && home.err.contains("DARWIN_NOTIFY_CONTAINER_ROOT") && home.err.contains("--container"), "\(home)")
        }

        @Test("wormhole read prints a data message as base64 with a note (--raw: its bytes); damaged JSON is called that")
        func dataAndDamagedJSON() throws {
            let wormhole = try fixture.wormhole()
            let bytes = Data([0, 1, 2, 0xff, 0xfe])
            try wormhole.pass(data: bytes, identifier: "blob")
            let read = try fixture.cli(["read", "group.test", "blob"])
            #expect(read.status == 0 && read.out == bytes.base64EncodedString() + "\n", "\(read)")
            #expect(read.err.contains("binary data, printed as base64"), "\(read.err)")
            let raw = try run("/bin/sh", ["-c", "\"$1\" read --raw group.test blob | od -An -tx1", "sh", ChildProcess.productsDirectory + "/wormhole"],
                              environment: fixture.environment)
            #expect(raw.out.split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }.filter { !$0.isEmpty }
                    == ["00", "01", "02", "ff", "fe"], "\(raw)")
            // A message marked JSON whose payload does not parse (a foreign writer's mistake).
            try wormhole.passJSON(Data("{\"ok\":1}".utf8), identifier: "doc")
            let path = wormhole.container.path + "/wormhole/messages/doc"
            var file = try Data(contentsOf: URL(fileURLWithPath: path))
            let header = file.firstIndex(of: 0x0a)!
            let badPayload = Data("{\"ok\":}".utf8)
            // Rewrite the payload with a correct length and checksum, so only the JSON is wrong.
            file = try WormholeTestSupport.envelope(kind: "json", payload: badPayload, like: Data(file[..<header]))
            try file.write(to: URL(fileURLWithPath: path))
            let damaged = try fixture.cli(["read", "group.test", "doc"])
            #expect(damaged.status != 0 && damaged.err.contains("damaged JSON"), "\(damaged)")
        }

        @Test("a misspelt wormhole subcommand gets a suggestion; empty stdin for pass says it read stdin")
        func typosAndStdin() throws {
            let typo = try fixture.cli(["pas", "group.test", "id", "1"])
            #expect(typo.status == 64 && typo.err.contains("Did you mean 'pass'?"), "\(typo)")
            #expect(!typo.err.contains("unexpected arguments"))
            let empty = try run("/bin/sh", ["-c", "\"$1\" pass group.test id </dev/null", "sh", ChildProcess.productsDirectory + "/wormhole"],
                                environment: fixture.environment)
            #expect(empty.status != 0 && empty.err.contains("read nothing on standard input"), "\(empty)")
        }
    }
}

import Foundation
import Testing

/// The embedded bus: started on first use, shared, restarted when dead, controlled by notifyutil.
extension IntegrationSuites {
    @Suite("Embedded bus", .serialized)
    struct EmbeddedBusTests {
        /// A fresh XDG_RUNTIME_DIR, so the test never touches the user's embedded bus.
        let runtime: String
        var env: [String: String] { ["XDG_RUNTIME_DIR": runtime, "DARWIN_NOTIFY_BUS": "embedded"] }

        init() throws {
            runtime = try makeTemporaryDirectory("embedded")
            chmod(runtime, 0o700)
        }

        private func stop() { _ = try? run("notifyutil", ["--bus-stop"], environment: env) }

        @Test("first use starts it; observers and posters meet on it; --bus-stop stops it")
        func startsOnFirstUse() throws {
            defer { stop() }
            var status = try run("notifyutil", ["--bus-status"], environment: env)
            #expect(status.out.hasPrefix("stopped unix:path=\(runtime)/darwin-notify/bus"))
            let observer = try ChildProcess("cnotify-probe", ["observe", "1", "embedded.x"], environment: env)
            try observer.waitForLine("ready")
            let post = try run("notifyutil", ["-p", "embedded.x"], environment: env)
            #expect(post.status == 0, "\(post.err)")
            #expect(try observer.waitForExit() == 0)
            status = try run("notifyutil", ["--bus-status"], environment: env)
            #expect(status.out.hasPrefix("running "))
            var mode = stat()
            stat(runtime + "/darwin-notify", &mode)
            #expect(mode.st_mode & 0o777 == 0o700)
            #expect(try run("notifyutil", ["--bus-stop"], environment: env).status == 0)
            #expect(try run("notifyutil", ["--bus-status"], environment: env).out.hasPrefix("stopped "))
            let again = try run("notifyutil", ["--bus-stop"], environment: env) // not running: say so, and succeed
            #expect(again.status == 0 && again.out == "not running\n", "\(again)")
        }

        @Test("several processes starting it at once end up with one daemon")
        func concurrentStart() throws {
            defer { stop() }
            let starters = try (0..<6).map { _ in try ChildProcess("notifyutil", ["--bus-start"], environment: env) }
            for s in starters { #expect(try s.waitForExit() == 0, "\(s.stderr)") }
            let addresses = Set(starters.map { $0.stdout })
            #expect(addresses.count == 1)
            let daemons = try run("/usr/bin/pgrep", ["-f", "--", "config-file=\(runtime)/darwin-notify/bus.conf"])
            #expect(daemons.out.split(separator: "\n").count == 1, "daemons: \(daemons.out)")
        }

        @Test("it outlives its starter, and a dead one is restarted by the next use")
        func restartsWhenDead() throws {
            defer { stop() }
            #expect(try run("notifyutil", ["-p", "start.me"], environment: env).status == 0)
            #expect(try run("notifyutil", ["--bus-status"], environment: env).out.hasPrefix("running "))
            let pidText = try String(contentsOfFile: runtime + "/darwin-notify/bus.pid", encoding: .utf8)
            let pid = try #require(Int32(pidText.trimmingCharacters(in: .whitespacesAndNewlines)))
            kill(pid, SIGKILL)
            try repeatUntil("the killed daemon to go", action: {}, done: { kill(pid, 0) != 0 })
            let post = try run("notifyutil", ["-p", "after.death"], environment: env)
            #expect(post.status == 0, "\(post.err)")
            #expect(try run("notifyutil", ["--bus-status"], environment: env).out.hasPrefix("running "))
        }

        @Test("--bus-stop while a watcher runs: one daemon afterwards, the truth from --bus-status, and the watcher still hears")
        func stopUnderWatchers() throws {
            defer { stop() }
            #expect(try run("notifyutil", ["--bus-start"], environment: env).status == 0)
            let watcher = try ChildProcess("notifyutil", ["-w", "k"], environment: env)
            try repeatUntil("the watcher to hear k", action: {
                _ = try run("notifyutil", ["-z", "0", "-p", "k"], environment: env)
            }, done: { watcher.lines.contains("k") })
            let heard = watcher.lines.count
            #expect(try run("notifyutil", ["--bus-stop"], environment: env).status == 0)
            // The watcher reconnects (starting the bus again, as any client does); a poster then
            // reaches the same daemon, never a second one.
            try repeatUntil("the watcher to hear k after --bus-stop", action: {
                _ = try run("notifyutil", ["-z", "0", "-p", "k"], environment: env)
            }, done: { watcher.lines.count > heard })
            let daemons = try run("/usr/bin/pgrep", ["-f", "--", "config-file=\(runtime)/darwin-notify/bus.conf"])
            #expect(daemons.out.split(separator: "\n").count == 1, "daemons: \(daemons.out)")
            #expect(try run("notifyutil", ["--bus-status"], environment: env).out.hasPrefix("running "))
            watcher.kill()
            _ = try? watcher.waitForExit()
        }
    }
}

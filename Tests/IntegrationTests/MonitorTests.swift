import Foundation
import Testing

/// `notifyutil --monitor [--json]` (issue 13, part 2): every post on the bus, with its sender.
extension IntegrationSuites {
    @Suite("notifyutil --monitor", .serialized)
    struct MonitorTests {
        let bus: TestBus
        init() throws { bus = try TestBus() }

        @Test("--json: one object per post: ours and foreign, sender's uid, sequence and gaps")
        func jsonLines() throws {
            let monitor = try ChildProcess("notifyutil", ["--monitor", "--json"], environment: bus.environment)
            defer { monitor.kill() }
            try repeatUntil("the monitor to see a sentinel", action: {
                try notifyutilPost(["monitor.sentinel"], bus: bus)
            }, done: { monitor.stdout.contains("monitor.sentinel") })
            // A long-lived poster (its credentials are asked while it is still connected).
            let holder = try ChildProcess("cnotify-probe", ["raw-post", "1", "monitor.ours"], environment: bus.environment, stdin: true)
            try holder.waitForLine("sent 1")
            let foreign = try run("/usr/bin/dbus-send", ["--bus=\(bus.address)", "--type=signal", "/org/darwinnotify",
                                                         "org.darwinnotify.Notify.Post", "string:monitor \"foreign\""])
            #expect(foreign.status == 0)
            #expect(try run("cnotify-probe", ["forge-seq", "monitor.gap", "1", "5"], environment: bus.environment).status == 0)
            try monitor.waitForLine { $0.contains("\"monitor.gap\"") && $0.contains("\"seq\":5") }
            holder.closeStdin()
            let objects = try monitor.lines.map { line -> [String: Any] in
                try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not JSON: \(line)")
            }
            let ours = try #require(objects.first { $0["name"] as? String == "monitor.ours" })
            #expect(ours["client"] as? String == "foreign" || ours["client"] as? String == "darwin-notify")
            #expect(ours["uid"] as? Int == Int(geteuid()), "\(ours)")
            #expect((ours["pid"] as? Int ?? 0) > 0, "\(ours)")
            let quoted = try #require(objects.first { $0["name"] as? String == "monitor \"foreign\"" }, "\(monitor.lines)")
            #expect(quoted["client"] as? String == "foreign" && quoted["seq"] is NSNull)
            let gap = try #require(objects.first { $0["name"] as? String == "monitor.gap" && $0["seq"] as? Int == 5 })
            #expect(gap["gap"] as? Int == 3 && gap["client"] as? String == "darwin-notify", "\(gap)")
            let sentinel = try #require(objects.first { $0["name"] as? String == "monitor.sentinel" })
            #expect(sentinel["client"] as? String == "darwin-notify" && sentinel["seq"] as? Int == 1, "\(sentinel)")
        }

        @Test("text lines, and a clear error for an unreachable bus")
        func textAndErrors() throws {
            let monitor = try ChildProcess("notifyutil", ["--monitor"], environment: bus.environment)
            defer { monitor.kill() }
            try monitor.waitForStderr("monitoring every post")
            try repeatUntil("the monitor to print a line", action: {
                try notifyutilPost(["monitor.text"], bus: bus)
            }, done: { monitor.lines.contains { $0.contains(" monitor.text sender=:") } })
            let line = try #require(monitor.lines.first { $0.contains(" monitor.text ") })
            #expect(line.hasSuffix(" seq=1 darwin-notify"), "\(line)")
            let down = try run("notifyutil", ["--bus", "unix:path=/nonexistent/darwin-notify-monitor", "--monitor"])
            #expect(down.status == 1 && down.err.contains("cannot reach the bus"), "\(down)")
        }
    }
}

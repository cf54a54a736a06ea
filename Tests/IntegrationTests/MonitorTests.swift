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

        @Test("the receivers' own rules (the C core's parser and CNotify_sequences): a duplicate and a malformed post are marked, a jump back is no gap")
        func receiversRules() throws {
            let monitor = try ChildProcess("notifyutil", ["--monitor", "--json"], environment: bus.environment)
            defer { monitor.kill() }
            try repeatUntil("the monitor to see a sentinel", action: { try notifyutilPost(["monitor.sentinel"], bus: bus) },
                            done: { monitor.stdout.contains("monitor.sentinel") })
            // One origin: 5, 3, 3, 5 (PROTOCOL.md "Origins": 3 again is a duplicate; 3 -> 5 loses 4).
            #expect(try run("cnotify-probe", ["forge-origin", "99", "monitor.dup:5", "monitor.dup:3", "monitor.dup:3", "monitor.dup:5"],
                            environment: bus.environment).status == 0)
            // An empty name: not a Post any receiver reads.
            #expect(try run("cnotify-probe", ["forge-seq", "", "1"], environment: bus.environment).status == 0)
            #expect(try run("cnotify-probe", ["forge-seq", "monitor.end", "1"], environment: bus.environment).status == 0)
            try monitor.waitForLine { $0.contains("\"monitor.end\"") }
            let objects = try monitor.lines.map { line -> [String: Any] in
                try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not JSON: \(line)")
            }
            let dup = objects.filter { $0["name"] as? String == "monitor.dup" }
            #expect(dup.map { $0["seq"] as? Int } == [5, 3, 3, 5], "\(dup)")
            #expect(dup.map { $0["rejected"] as? String } == [nil, nil, "duplicate", nil], "\(dup)")
            #expect(dup.map { $0["gap"] as? Int } == [0, 0, 0, 1], "\(dup)")
            let empty = try #require(objects.first { $0["name"] as? String == "" }, "\(monitor.lines)")
            #expect(empty["rejected"] as? String == "malformed", "\(empty)")
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
    
        @Test("a name's control characters cannot reach the watcher's terminal (issue 19 item 7)")
        func controlCharactersAreEscaped() throws {
            let monitor = try ChildProcess("notifyutil", ["--monitor"], environment: bus.environment)
            defer { monitor.kill() }
            try monitor.waitForStderr("monitoring every post")
            let evil = "x\u{1b}[2Jy\nforged 1.0 line\u{9b}z\\"
            try repeatUntil("the monitor to see the escaped name", action: {
                try notifyutilPost([evil], bus: bus)
            }, done: { monitor.stdout.contains(" x\\x1B[2Jy\\x0Aforged 1.0 line\\x9Bz\\x5C sender=") })
            #expect(!monitor.stdout.contains("\u{1b}") && !monitor.stdout.contains("\u{9b}"), "\(monitor.stdout)")
            #expect(!monitor.lines.contains { $0.hasPrefix("forged") }, "\(monitor.lines)")
        }

        @Test("posts every receiver drops are marked as such: self. names, user.uid.N from another uid (issue 19 item 8)")
        func rejectedPostsAreMarked() throws {
            let monitor = try ChildProcess("notifyutil", ["--monitor", "--json"], environment: bus.environment)
            defer { monitor.kill() }
            try repeatUntil("the monitor to see a sentinel", action: {
                try notifyutilPost(["monitor.sentinel2"], bus: bus)
            }, done: { monitor.stdout.contains("monitor.sentinel2") })
            let sent = try run("/usr/bin/dbus-send", ["--bus=\(bus.address)", "--type=signal", "/org/darwinnotify",
                                                      "org.darwinnotify.Notify.Post", "string:self.forged"])
            #expect(sent.status == 0)
            // A post of our own user.uid.N name, with no credential, from a sender that stays
            // connected while the monitor asks the bus: proven, so not marked. (One gone before it
            // is asked is marked, as receivers drop it: which comes first is a race, so not here.)
            let holder = try ChildProcess("cnotify-probe", ["raw-post", "1", "user.uid.\(geteuid()).mine"], environment: bus.environment, stdin: true)
            try holder.waitForLine("sent 1")
            try notifyutilPost(["monitor.after"], bus: bus)
            try monitor.waitForLine { $0.contains("\"monitor.after\"") }
            let selfLine = try #require(monitor.lines.first { $0.contains("\"self.forged\"") })
            #expect(selfLine.contains("\"rejected\":\"self\""), "\(selfLine)")
            let mine = try #require(monitor.lines.first { $0.contains("user.uid.\(geteuid()).mine") })
            #expect(mine.contains("\"rejected\":null"), "\(mine)")
            #expect(monitor.lines.first { $0.contains("\"monitor.after\"") }?.contains("\"rejected\":null") == true)
            holder.closeStdin()
            _ = try holder.waitForExit()
            // Another uid's user.uid.0 post, on a bus several users share.
            guard geteuid() == 0 else { return }
            let shared = try SystemLikeBus()
            let watcher = try ChildProcess("notifyutil", ["--monitor"], environment: shared.environment)
            defer { watcher.kill() }
            try watcher.waitForStderr("monitoring every post")
            try repeatUntil("the forged post to be seen", action: {
                _ = try shared.runAsNobody("/usr/bin/dbus-send", ["--bus=\(shared.address)", "--type=signal", "/org/darwinnotify",
                                                                 "org.darwinnotify.Notify.Post", "string:user.uid.0.forged"])
            }, done: { watcher.stdout.contains(" user.uid.0.forged ") })
            let forged = try #require(watcher.lines.first { $0.contains(" user.uid.0.forged ") })
            #expect(forged.hasSuffix(" foreign rejected=uid"), "\(forged)")
        }

        @Test("40 posts with distinct 1 MiB names leave the monitor's memory bounded (issue 19 item 12)",
              .enabled(if: ProcessInfo.processInfo.environment["DARWIN_NOTIFY_SANITIZER"] == nil, "ASan holds freed memory"))
        func hugeNamesDoNotAccumulate() throws {
            let monitor = try ChildProcess("notifyutil", ["--monitor"], environment: bus.environment)
            defer { monitor.kill() }
            try monitor.waitForStderr("monitoring every post")
            let poster = try ChildProcess("cnotify-probe", ["forge-huge", "40", "1048576"], environment: bus.environment)
            #expect(try poster.waitForExit(timeout: 120) == 0, "\(poster.stderr)")
            try repeatUntil(timeout: 120, "the sentinel after 40 huge names", action: { try notifyutilPost(["monitor.huge.done"], bus: bus) },
                            done: { monitor.stdout.contains(" monitor.huge.done ") })
            #expect(monitor.lines.filter { $0.contains(" sender=") }.count >= 41)
            let status = try String(contentsOfFile: "/proc/\(monitor.processIdentifier)/status", encoding: .utf8)
            let rss = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }.flatMap { Int($0.split(separator: " ")[1]) } ?? .max
            #expect(rss < 25_000, "the monitor holds \(rss) KiB after 40 MiB of names (before the fix: 5 MiB names took it to 230 MB)")
            #expect(monitor.isRunning)
        }

        @Test("one jump counts at most 2^20 as in the library, and the monitor reconnects when the bus comes back (issue 20 item 8)")
        func gapCappedAndReconnects() throws {
            let monitor = try ChildProcess("notifyutil", ["--monitor", "--json"], environment: bus.environment)
            defer { monitor.kill() }
            try repeatUntil("the monitor to see a sentinel", action: {
                try notifyutilPost(["monitor.sentinel3"], bus: bus)
            }, done: { monitor.stdout.contains("monitor.sentinel3") })
            #expect(try run("cnotify-probe", ["forge-seq", "monitor.jump", "1", "2000000"], environment: bus.environment).status == 0)
            let jump = try monitor.waitForLine { $0.contains("\"monitor.jump\"") && $0.contains("\"seq\":2000000") }
            #expect(jump.contains("\"gap\":\(1 << 20)"), "\(jump)")
            try bus.restart()
            try monitor.waitForStderr("reconnected", timeout: 30)
            #expect(monitor.isRunning)
            try repeatUntil("a post after the restart", action: { try notifyutilPost(["monitor.after.restart"], bus: bus) },
                            done: { monitor.stdout.contains("monitor.after.restart") })
        }
    }
}

import Foundation
import Testing

/// `notifyutil` with Apple's syntax and output: delivery types, state commands, the -z pause.
extension IntegrationSuites {
    @Suite("notifyutil, complete", .serialized)
    struct NotifyUtilTests {
        let bus: TestBus
        init() throws { bus = try TestBus() }

        @Test("each delivery switch receives, and -v names its type", arguments: [
            ("-port", "port"), ("-file", "file"), ("-check", "check"), ("-plain", "plain"),
            ("-dispatch", "dispatch"), ("-signal", "signal"),
        ])
        func deliveryTypes(flag: String, type: String) throws {
            let name = "util.type.\(type)"
            try expectSuccess(run("notifyutil", ["-s", name, "7"], environment: bus.environment))
            let waiter = try ChildProcess("notifyutil", ["-v", flag, "-1", name], environment: bus.environment)
            // No readiness line before the first notification: post until it has one.
            try repeatUntil("notifyutil \(flag) to receive", action: { try notifyutilPost([name], bus: bus) },
                            done: { !waiter.isRunning })
            #expect(try waiter.waitForExit() == 0, "\(waiter.stderr)")
            let line = try #require(waiter.lines.last, "no output: \(waiter.stderr)")
            #expect(line.wholeMatch(of: /\[\d+\] \d+\.\d{3} util\.type\.[a-z]+ 7 [a-z]+/) != nil, "got: \(line)")
            #expect(line.hasSuffix(" \(name) 7 \(type)"), "got: \(line)")
            if type == "signal" { #expect(waiter.lines.first == "SIGNAL 1", "\(waiter.lines)") }
        }

        @Test("the C front door posts as a center does: each name numbered from 1, one sender and origin, restricted names signed; every other command line runs the full notifyutil")
        func frontDoor() throws {
            let monitor = try ChildProcess("notifyutil", ["--monitor", "--json"], environment: bus.environment)
            defer { monitor.kill() }
            try repeatUntil("the monitor to see a sentinel", action: {
                try notifyutilPost(["front.sentinel"], bus: bus)
            }, done: { monitor.stdout.contains("front.sentinel") })
            try expectSuccess(run("notifyutil", ["-q", "-M", "-R", "-z", "0", "-p", "front.a", "-p", "front.a", "-p", "front.b"],
                                  environment: bus.environment))
            try monitor.waitForLine { $0.contains("\"front.b\"") }
            let posts = try monitor.lines.compactMap { line -> [String: Any]? in
                let object = try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not JSON: \(line)")
                return (object["name"] as? String)?.hasPrefix("front.") == true && object["name"] as? String != "front.sentinel" ? object : nil
            }
            #expect(posts.map { "\($0["name"]!) \($0["seq"]!) \($0["client"]!)" }
                    == ["front.a 1 darwin-notify", "front.a 2 darwin-notify", "front.b 1 darwin-notify"], "\(monitor.lines)")
            #expect(Set(posts.compactMap { $0["sender"] as? String }).count == 1, "one connection: \(posts)")
            // A user.uid.N name needs a credential the center makes: it is posted through one.
            let own = "user.uid.\(geteuid()).front"
            let waiter = try ChildProcess("notifyutil", ["-1", own], environment: bus.environment)
            try repeatUntil("a restricted post from the front door to arrive", action: { try notifyutilPost([own], bus: bus) },
                            done: { !waiter.isRunning })
            #expect(try waiter.waitForExit() == 0 && waiter.lines == [own], "\(waiter.lines) \(waiter.stderr)")
            // Not a post-only command line: the full tool, with its output and its errors.
            let verbose = try run("notifyutil", ["-v", "-z", "0", "-p", "front.v", "-g", "front.v"], environment: bus.environment)
            #expect(verbose.status == 0 && verbose.out.hasSuffix("front.v 0\n"), "\(verbose)")
            let signed = try run("notifyutil", ["-z", "+5", "-p", "front.x"], environment: bus.environment)
            #expect(signed.status == 0, "Swift's Int(\"+5\") is 5: the full tool's reading, not a refusal: \(signed)")
            let empty = try run("notifyutil", ["-z", "0", "-p", "front.ok", "-p", ""], environment: bus.environment)
            #expect(empty.status == 1 && empty.err == "notifyutil: -p '': Invalid Name: notification name is empty\n", "\(empty)")
            let unreachable = try run("notifyutil", ["--bus", "unix:path=/nonexistent/front", "-z", "0", "-p", "front.x"])
            #expect(unreachable.status == 1 && unreachable.err.contains("cannot reach the bus at unix:path=/nonexistent/front"), "\(unreachable)")
        }

        @Test("two registrations on one signal: each is reported once, and the run ends after both")
        func twoSignalRegistrations() throws {
            let waiter = try ChildProcess("notifyutil", ["-signal", "10", "-1", "util.sig.a", "-1", "util.sig.b"],
                                          environment: bus.environment)
            try repeatUntil("util.sig.a to be reported", action: { try notifyutilPost(["util.sig.a"], bus: bus) },
                            done: { waiter.lines.contains("util.sig.a") })
            try repeatUntil("notifyutil to end after util.sig.b", action: { try notifyutilPost(["util.sig.b"], bus: bus) },
                            done: { !waiter.isRunning })
            #expect(try waiter.waitForExit() == 0, "\(waiter.stderr)")
            #expect(waiter.lines.filter { $0.hasPrefix("util.sig.") } == ["util.sig.a", "util.sig.b"], "\(waiter.lines)")
            #expect(waiter.lines.contains("SIGNAL 10"))
        }

        @Test("a signal registration made while its name is posted all the time: the process lives (its signal is ignored before the registration exists), reports the name, and ends")
        func signalRegistrationDuringAFlood() throws {
            // notify_post from another process, as fast as it can, for the whole test.
            let flood = try ChildProcess("cnotify-probe", ["post", "util.sig.flood", "2000000"], environment: bus.environment)
            defer { flood.kill() }
            for _ in 0..<5 {
                let waiter = try ChildProcess("notifyutil", ["-signal", "10", "-1", "util.sig.flood"], environment: bus.environment)
                // Killed by SIGUSR1 (the default action) when a post came between the registration and
                // the signal being ignored (seen in CI: "two registrations on one signal" waited 20 s).
                let status = try waiter.waitForExit(timeout: 60)
                #expect(status == 0 && waiter.lines.contains("util.sig.flood"), "status \(status): \(waiter.lines) \(waiter.stderr)")
            }
        }

        @Test("-s key value then -g key prints 'key value', from another process; -g of an unset key is 0")
        func stateCommands() throws {
            try expectSuccess(run("notifyutil", ["-s", "util.state", "18446744073709551615"], environment: bus.environment))
            let get = try run("notifyutil", ["-g", "util.state", "-g", "util.never"], environment: bus.environment)
            #expect(get.status == 0)
            #expect(get.out == "util.state 18446744073709551615\nutil.never 0\n")
        }

        @Test("bad arguments: one line on stderr ending 'see notifyutil -h', and exit 64", arguments: [
            ["-s", "k", "abc"], ["-s", "k"], ["-g"], ["-signal", "x", "-w", "k"], ["-port", "-bogus"], ["-0", "k"], [],
        ])
        func badArguments(arguments: [String]) throws {
            let r = try run("notifyutil", arguments, environment: bus.environment)
            #expect(r.status == 64, "\(arguments): \(r)")
            #expect(r.err.hasPrefix("notifyutil: ") && r.err.hasSuffix("; see notifyutil -h\n"), "\(r.err)")
            #expect(r.err.split(separator: "\n").count == 1, "more than one line: \(r.err)")
            #expect(!r.err.contains("usage:"), "the whole usage again: \(r.err)")
        }

        @Test("-z: Apple's 100 ms pause after each post by default; -z 0 none")
        func napAfterPost() throws {
            let start = Date()
            try expectSuccess(run("notifyutil", ["-p", "util.nap", "-p", "util.nap"], environment: bus.environment))
            // A lower bound only: two posts cannot take less than their two pauses.
            #expect(Date().timeIntervalSince(start) >= 0.2)
        }
    }
}

/// Fails loudly unless a command run with `run` exited 0.
private func expectSuccess(_ result: (status: Int32, out: String, err: String)) throws {
    guard result.status == 0 else { throw TestFailure("exit \(result.status): \(result.err)") }
}

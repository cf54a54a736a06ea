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

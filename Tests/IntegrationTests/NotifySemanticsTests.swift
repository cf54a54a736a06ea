import Foundation
import Testing

/// The rest of notify(3) in C: signal and dispatch registrations, suspend/resume, `self.` names.
/// A C probe registers and reports; posts come from `notifyutil`, another process.
extension IntegrationSuites {
    @Suite("notify(3) registrations and suspension", .serialized)
    struct NotifySemanticsTests {
        let bus: TestBus
        init() throws { bus = try TestBus() }

        private func probe(_ arguments: [String], environment: [String: String]? = nil) throws -> ChildProcess {
            try ChildProcess("cnotify-probe", arguments, environment: environment ?? bus.environment)
        }

        @Test("a signal registration raises its signal on a post, and notify_check tells which token fired")
        func signalRegistration() throws {
            let child = try probe(["signal", "sem.sig.a", "sem.sig.b"])
            try child.waitForLine("ready")
            try notifyutilPost(["sem.sig.a"], bus: bus)
            #expect(try child.waitForExit() == 0, "\(child.stderr)")
            #expect(child.lines.contains("signal SIGUSR1, check sem.sig.a=1 sem.sig.b=0"), "\(child.lines)")
            for bad in ["0", "-3", "999"] {
                #expect(child.lines.contains("invalid \(bad): 5"), "NOTIFY_STATUS_INVALID_SIGNAL for \(bad): \(child.lines)")
            }
        }

        @Test("a dispatch handler may cancel its own token; none runs after notify_cancel returns")
        func dispatchRegistration() throws {
            let child = try probe(["dispatch", "sem.dispatch"])
            try child.waitForLine("ready")
            try notifyutilPost(["sem.dispatch"], bus: bus)
            #expect(try child.waitForExit() == 0, "\(child.stderr)")
            let lines = child.lines
            #expect(lines.contains("null queue: 10") && lines.contains("null handler: 10"), "\(lines)")
            #expect(lines.contains("cancel in handler: 0"), "\(lines)")
            #expect(lines.contains("after cancel: runs=1"), "three more posts ran a cancelled handler: \(lines)")
            #expect(lines.contains("cancel while running: 0, handler finished before it returned: 1"), "\(lines)")
            #expect(lines.contains("cancel again: 2"), "\(lines)")
        }

        @Test("suspend, three posts, resume: exactly one delivery; nesting; resume without suspend is NOTIFY_STATUS_OK and changes nothing, as Libnotify's notify_client.c (issue 33 item 8)")
        func suspendResume() throws {
            let child = try probe(["suspend", "sem.suspend"])
            try child.waitForLine("ready")
            // One poster, in order: the sentinel arrives after the three posts.
            try notifyutilPost(["sem.suspend", "sem.suspend", "sem.suspend", "sem.suspend.sentinel"], bus: bus)
            #expect(try child.waitForExit() == 0, "\(child.stderr)")
            #expect(child.lines == [
                "ready",
                "while suspended: 0 bytes",
                "check while suspended (first call): 1",
                "after resume: 1 deliveries",
                "check after resume: 1",
                "suspend, no post, resume: 0 deliveries",
                "nested, first resume: 0 deliveries",
                "nested, second resume: 1 deliveries",
                "resume without suspend: 0",
                "a post after it: 1 deliveries",
                "suspend cancelled token: 2",
            ])
        }

        @Test("NOTIFY_REUSE takes only a descriptor notify returned: anything else is INVALID_FILE")
        func reuseForeignDescriptor() throws {
            let child = try probe(["reuse", "sem.reuse"])
            #expect(try child.waitForExit() == 0, "\(child.stderr)")
            #expect(child.lines == ["foreign pipe: 4", "stdin: 4", "closed: 4", "notify's own: 0, same descriptor: 1",
                                    "token written: 1"])
        }

        @Test("self. names work with no bus at all")
        func selfNamesWithoutBus() throws {
            let child = try probe(["self"], environment: ["DARWIN_NOTIFY_BUS": "unix:path=/nonexistent/darwin-notify-test"])
            #expect(try child.waitForExit() == 0, "\(child.stderr)")
            #expect(child.lines == [
                "register self.local: 0", "first check: 1", "unchanged: 0", "post self.local: 0", "after post: 1",
                "observe self.cf: 0", "callbacks: 3", "post bus name: 9",
                "post to a center its callback destroys: 0",
            ])
        }

        @Test("self. names never leave the process: the bus carries the next name, not them")
        func selfNamesStayLocal() throws {
            let monitor = try ChildProcess("/usr/bin/dbus-monitor", ["--address", bus.address, "type='signal',path='/org/darwinnotify'"])
            try repeatUntil("dbus-monitor to see a post", action: { try notifyutilPost(["sem.monitor.ready"], bus: bus) },
                            done: { monitor.stdout.contains("sem.monitor.ready") })
            try notifyutilPost(["self.secret", "sem.after.self"], bus: bus)
            try repeatUntil("the post after the self. name", action: {}, done: { monitor.stdout.contains("sem.after.self") })
            #expect(!monitor.stdout.contains("self.secret"))
            monitor.kill()
        }
    }
}

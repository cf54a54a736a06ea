import Foundation
import Testing

/// user.uid.N names and shared state across two uids on a system-like bus with our policy file.
/// CI runs as root and uses `nobody` as the second uid.
extension IntegrationSuites {
    @Suite("user.uid.N and state across users", .serialized, .enabled(if: geteuid() == 0, "needs root to run a second uid"))
    struct UserScopeTests {
        let bus: SystemLikeBus
        init() throws { bus = try SystemLikeBus() }

        @Test("a forged post of user.uid.0.x from an unprivileged process is delivered to nobody")
        func forgedPostsAreDropped() throws {
            let guardian = try ChildProcess("cnotify-probe", ["guard", "user.uid.0.secret", "user.uid.65534.mine", "sentinel"],
                                            environment: bus.environment, stdin: true) // it runs until stdin closes
            try guardian.waitForLine("ready")
            // The library refuses to post it.
            let refused = try bus.runAsNobody("notifyutil", ["-p", "user.uid.0.secret"])
            #expect(refused.status != 0 && refused.err.contains("only uid 0 or root"), "\(refused)")
            // dbus-send bypasses the library: on the bucket interface and on the plain one.
            for interface in [bucketInterface("user.uid.0.secret"), "org.darwinnotify.Notify"] {
                let forged = try bus.runAsNobody("/usr/bin/dbus-send", ["--bus=\(bus.address)", "--type=signal", "/org/darwinnotify",
                                                                         "\(interface).Post", "string:user.uid.0.secret", "uint64:1"])
                #expect(forged.status == 0, "dbus-send as nobody: \(forged.err)")
            }
            // Both forgeries reached the observer and were dropped before it learns of the sentinel.
            try repeatUntil("the observer to drop both forged posts", action: {
                let r = try bus.runAsRoot("notifyutil", ["-p", "sentinel"])
                guard r.status == 0 else { throw TestFailure("notifyutil -p sentinel: \(r.err)") }
            }, done: { guardian.lines.contains("sentinel rejected=2") })
            // The rightful posters are heard: uid 65534 for its own name, root for uid 0's.
            #expect(try bus.runAsNobody("notifyutil", ["-p", "user.uid.65534.mine"]).status == 0)
            #expect(try bus.runAsRoot("notifyutil", ["-p", "user.uid.0.secret"]).status == 0)
            try guardian.waitForLine("user.uid.0.secret rejected=2")
            try guardian.waitForLine("user.uid.65534.mine rejected=2")
            #expect(guardian.lines.filter { $0.hasPrefix("user.uid.0.secret") }.count == 1, "\(guardian.lines)")
            guardian.closeStdin()
            _ = try guardian.waitForExit()
        }

        @Test("state is shared across uids; only N or root may set user.uid.N state")
        func stateAcrossUsers() throws {
            func state(_ asNobody: Bool, _ args: [String]) throws -> String {
                let r = asNobody ? try bus.runAsNobody("cnotify-probe", ["state"] + args)
                                 : try bus.runAsRoot("cnotify-probe", ["state"] + args)
                return r.out.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            #expect(try state(true, ["set", "user.uid.0.x", "9"]).hasPrefix("set user.uid.0.x: Not Authorized only uid 0 or root"))
            #expect(try state(false, ["set", "user.uid.0.x", "7"]) == "set user.uid.0.x: OK")
            #expect(try state(true, ["get", "user.uid.0.x"]) == "get user.uid.0.x: OK 7")
            #expect(try state(true, ["set", "shared.x", "5"]) == "set shared.x: OK")
            #expect(try state(false, ["get", "shared.x"]) == "get shared.x: OK 5")
            #expect(try state(false, ["set", "shared.x", "6"]) == "set shared.x: OK")
            #expect(try state(true, ["get", "shared.x"]) == "get shared.x: OK 6")
            #expect(try state(true, ["set", "user.uid.65534.y", "3"]) == "set user.uid.65534.y: OK")
            #expect(try state(false, ["get", "user.uid.65534.y"]) == "get user.uid.65534.y: OK 3")
            #expect(try state(false, ["set", "user.uid.65534.y", "4"]) == "set user.uid.65534.y: OK")
            #expect(try state(true, ["get", "user.uid.65534.y"]) == "get user.uid.65534.y: OK 4")
        }
    }
}

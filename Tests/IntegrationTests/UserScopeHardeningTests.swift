import Foundation
import Testing

/// Attacks by a second (and third) uid on a shared, system-like bus: restricted posts forged after
/// a restart, replayed, or named past the uid range; legitimate ones from posters that exit at
/// once; state files made first by someone else.
extension IntegrationSuites {
    @Suite("Hardening: user.uid.N and state across users", .serialized, .enabled(if: geteuid() == 0, "needs root to run other uids"))
    struct UserScopeHardeningTests {
        let bus: SystemLikeBus
        init() throws { bus = try SystemLikeBus() }

        func root(_ executable: String, _ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
            try bus.runAsRoot(executable, arguments)
        }

        /// Posts `sentinel` as root until `done`: the observer has handled everything sent before.
        func sentinel(_ name: String, _ what: String, _ done: () -> Bool) throws {
            try repeatUntil(what, action: {
                let r = try root("notifyutil", ["-z", "0", "-p", name])
                guard r.status == 0 else { throw TestFailure("notifyutil -p \(name): \(r.err)") }
            }, done: done)
        }

        @Test("restricted posts from posters that exit at once are all delivered (60 of 60)")
        func quickPostersAreHeard() throws {
            let observer = try ChildProcess("cnotify-probe", ["stats", "user.uid.65534.quick", "user.uid.0.quick", "sentinel.quick"],
                                            environment: bus.environment, stdin: true)
            try observer.waitForLine("ready")
            for _ in 0 ..< 30 {
                #expect(try bus.runAsNobody("notifyutil", ["-z", "0", "-p", "user.uid.65534.quick"]).status == 0)
                #expect(try root("notifyutil", ["-z", "0", "-p", "user.uid.0.quick"]).status == 0)
            }
            try sentinel("sentinel.quick", "the sentinel after 60 restricted posts") { observer.lines.contains { $0.hasPrefix("sentinel.quick") } }
            let mine = observer.lines.filter { $0.hasPrefix("user.uid.65534.quick ") }.count
            let roots = observer.lines.filter { $0.hasPrefix("user.uid.0.quick ") }.count
            #expect(mine == 30 && roots == 30, "delivered \(mine) + \(roots) of 60: \(observer.lines.suffix(3))")
            #expect(observer.lines.last { $0.hasPrefix("sentinel.quick") }?.contains("rejected=0") == true)
            observer.closeStdin()
            _ = try observer.waitForExit()
        }

        @Test("after a bus restart, a forged user.uid.0 post from a reused unique name is rejected")
        func restartDoesNotLendRootsNames() throws {
            let observer = try ChildProcess("cnotify-probe", ["stats", "user.uid.0.secret", "sentinel.restart"],
                                            environment: bus.environment, stdin: true)
            try observer.waitForLine("ready")
            // Root posts from 8 connections that stay: the observer learns 8 unique names as root's.
            let rootPoster = try ChildProcess("cnotify-probe", ["raw-post", "8", "user.uid.0.secret"],
                                              environment: bus.environment, stdin: true)
            try rootPoster.waitForLine("sent 8")
            try repeatUntil("root's 8 posts", action: {}, done: {
                observer.lines.filter { $0.hasPrefix("user.uid.0.secret ") }.count == 8
            })
            try bus.restart()
            try observer.waitForLine(timeout: 20) { $0 == "reconnects=1" }
            // The new daemon hands the same names out again: to nobody's forgers now.
            for _ in 0 ..< 9 {
                let forged = try bus.runAsNobody("/usr/bin/dbus-send", ["--bus=\(bus.address)", "--type=signal", "/org/darwinnotify",
                                                                         "\(bucketInterface("user.uid.0.secret")).Post",
                                                                         "string:user.uid.0.secret", "uint64:2"])
                #expect(forged.status == 0, "\(forged.err)")
            }
            try sentinel("sentinel.restart", "the sentinel after 9 forged posts") {
                observer.lines.contains { $0.hasPrefix("sentinel.restart") && $0.contains("rejected=9") }
            }
            #expect(observer.lines.filter { $0.hasPrefix("user.uid.0.secret ") }.count == 8, "\(observer.lines)")
            rootPoster.closeStdin()
            _ = try rootPoster.waitForExit()
            observer.closeStdin()
            _ = try observer.waitForExit()
        }

        @Test("a received credential sent again by someone else is rejected")
        func replayedCredentialIsRejected() throws {
            let observer = try ChildProcess("cnotify-probe", ["stats", "user.uid.0.replayed", "sentinel.replay"],
                                            environment: bus.environment, stdin: true)
            try observer.waitForLine("ready")
            let path = ChildProcess.productsDirectory + "/cnotify-probe"
            let replayer = try ChildProcess("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "--", path,
                                                                 "replay", "user.uid.0.replayed"],
                                            environment: bus.environment.merging(["HOME": "/nonexistent"]) { $1 })
            try replayer.waitForLine("ready")
            #expect(try root("notifyutil", ["-z", "0", "-p", "user.uid.0.replayed"]).status == 0)
            try replayer.waitForLine("replayed")
            try sentinel("sentinel.replay", "the sentinel after the replay") {
                observer.lines.contains { $0.hasPrefix("sentinel.replay") && $0.contains("rejected=1") }
            }
            #expect(observer.lines.filter { $0.hasPrefix("user.uid.0.replayed ") }.count == 1, "\(observer.lines)")
            observer.closeStdin()
            _ = try observer.waitForExit()
        }

        @Test("user.uid.N past the uid range is nobody's: refused to post, and rejected when forged")
        func uidOverflowIsRejected() throws {
            let wraps = "user.uid.18446744073709617150" // 2^64 + 65534: wrapped onto nobody's uid before
            let observer = try ChildProcess("cnotify-probe", ["stats", wraps, "sentinel.wrap"], environment: bus.environment, stdin: true)
            try observer.waitForLine("ready")
            let refused = try bus.runAsNobody("notifyutil", ["-z", "0", "-p", wraps])
            #expect(refused.status != 0 && refused.err.contains("not a uid"), "\(refused)")
            #expect(try root("notifyutil", ["-z", "0", "-p", "user.uid.4294967295"]).status != 0, "(uid_t)-1 is no uid")
            let forged = try bus.runAsNobody("/usr/bin/dbus-send", ["--bus=\(bus.address)", "--type=signal", "/org/darwinnotify",
                                                                     "\(bucketInterface(wraps)).Post", "string:\(wraps)", "uint64:1"])
            #expect(forged.status == 0)
            try sentinel("sentinel.wrap", "the sentinel after the forged post") {
                observer.lines.contains { $0.hasPrefix("sentinel.wrap") && $0.contains("rejected=1") }
            }
            #expect(!observer.lines.contains { $0.hasPrefix(wraps) })
            observer.closeStdin()
            _ = try observer.waitForExit()
        }

        /// The state file's name for `name` (two FNV-1a 64-bit hashes, docs/PROTOCOL.md).
        func stateFileName(_ name: String) -> String {
            func fnv(_ seed: UInt64) -> UInt64 {
                var h = seed
                for byte in name.utf8 { h = (h ^ UInt64(byte)) &* 1_099_511_628_211 }
                return h
            }
            let hex = { (v: UInt64) in String(repeating: "0", count: 16 - String(v, radix: 16).count) + String(v, radix: 16) }
            return hex(fnv(14_695_981_039_346_656_037)) + hex(fnv(0x8422_2325_cbf2_9ce4 ^ 0x5bd1_e995))
        }

        func state(_ uid: UInt32?, _ args: [String]) throws -> String {
            let r = try uid.map { try bus.runAs($0, "cnotify-probe", ["state"] + args) } ?? root("cnotify-probe", ["state"] + args)
            return r.out.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        @Test("state made first by another uid never locks out a name's rightful writer")
        func stateSquattingDoesNotLockOut() throws {
            let dir = bus.directory + "/state"
            let nobody = SystemLikeBus.nobody, third = SystemLikeBus.third
            // Root uses the directory first (as the installed tmpfiles entry would make it).
            #expect(try state(nil, ["set", "shared.init", "1"]) == "set shared.init: OK")
            // nobody squats root's name: a directory for uid 0's names, and a file where the name's
            // state used to live.
            #expect(try bus.runAs(nobody, "/bin/mkdir", [dir + "/uid.0"]).status == 0)
            #expect(try bus.runAs(nobody, "/usr/bin/touch", [dir + "/" + stateFileName("user.uid.0.squat")]).status == 0)
            #expect(try state(nil, ["set", "user.uid.0.squat", "7"]) == "set user.uid.0.squat: OK")
            #expect(try state(nil, ["get", "user.uid.0.squat"]) == "get user.uid.0.squat: OK 7")
            #expect(try state(nobody, ["get", "user.uid.0.squat"]) == "get user.uid.0.squat: OK 7")
            // A third uid squats nobody's directory: nobody still sets its own name.
            #expect(try bus.runAs(third, "/bin/mkdir", [dir + "/uid.\(nobody)"]).status == 0)
            #expect(try state(nobody, ["set", "user.uid.\(nobody).mine", "3"]) == "set user.uid.\(nobody).mine: OK")
            #expect(try state(nil, ["get", "user.uid.\(nobody).mine"]) == "get user.uid.\(nobody).mine: OK 3")
            #expect(try state(third, ["get", "user.uid.\(nobody).mine"]) == "get user.uid.\(nobody).mine: OK 3")
            // A plain name's file made 0644 by nobody: a third user may still set it.
            for path in [dir + "/plain/" + stateFileName("shared.squat"), dir + "/" + stateFileName("shared.squat")] {
                #expect(try bus.runAs(nobody, "/usr/bin/install", ["-m", "644", "/dev/null", path]).status == 0)
            }
            #expect(try state(third, ["set", "shared.squat", "5"]) == "set shared.squat: OK")
            #expect(try state(nil, ["get", "shared.squat"]) == "get shared.squat: OK 5")
            #expect(try state(nobody, ["get", "shared.squat"]) == "get shared.squat: OK 5")
            // A FIFO where a state file should be: read as unset and replaced, never waited on.
            #expect(try bus.runAs(nobody, "/usr/bin/mkfifo", [dir + "/plain/" + stateFileName("shared.fifo")]).status == 0)
            #expect(try state(third, ["get", "shared.fifo"]) == "get shared.fifo: OK 0")
            #expect(try state(third, ["set", "shared.fifo", "9"]) == "set shared.fifo: OK")
            #expect(try state(nil, ["get", "shared.fifo"]) == "get shared.fifo: OK 9")
        }
    }
}

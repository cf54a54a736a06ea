import Foundation
import Testing

/// notify.conf(5)'s `reserve` lines (issue 34) on a system-like bus with three uids: root, nobody
/// (65534, group 65534) and daemon (1, group 1). Every process reads the test's own notify.conf
/// ($DARWIN_NOTIFY_CONF, root's, 0644), as they would read /etc/darwin-notify/notify.conf.
extension IntegrationSuites {
    @Suite("notify.conf: reserved names", .serialized, .enabled(if: geteuid() == 0, "needs root to run other uids"))
    struct ReservedNameTests: FastPathDriving {
        let bus: SystemLikeBus
        let conf: String

        /// Apple's two reserve lines (notify.conf.MacOSX), with group 65534 for clock_set's group
        /// write, and one line the parser must refuse without losing the rest.
        static let text = """
            # the test's notify.conf
            reserve com.apple.system. 0 0 rwr-r-
            reserve com.apple.system.clock_set 0 65534 rwrwr-
            reserve test.everyone. 0 0 rwrwrw
            reserve test.badmode. 0 0 rwx---
            reserve test.secret. 0 0 rw----
            reserve test.wheel. 0 0 rwrw--
            reserve test.group. 0 4242 rwrw--
            """

        init() throws {
            bus = try SystemLikeBus(notifyConf: Self.text)
            conf = bus.confPath
        }

        /// Posts `name` with dbus-send as `uid`, bypassing the library: on the name's bucket
        /// interface and on the plain one.
        private func forge(_ name: String, as uid: UInt32) throws {
            for interface in [bucketInterface(name), "org.darwinnotify.Notify"] {
                let r = try bus.runAs(uid, "/usr/bin/dbus-send", ["--bus=\(bus.address)", "--type=signal", "/org/darwinnotify",
                                                                  "\(interface).Post", "string:\(name)", "uint64:1"])
                #expect(r.status == 0, "dbus-send as \(uid): \(r.err)")
            }
        }

        @Test("a reserved name is posted only by whom its mode allows: the library refuses the others, and every receiver drops their dbus-send forgeries and counts them")
        func reservedPosts() throws {
            let guardian = try ChildProcess("cnotify-probe", ["guard", "com.apple.system.timezone", "com.apple.system.clock_set",
                                                              "test.everyone.x", "sentinel"],
                                            environment: bus.environment, stdin: true)
            defer { guardian.closeStdin(); _ = try? guardian.waitForExit() }
            try guardian.waitForLine("ready")

            // nobody may not post com.apple.system.* (rwr-r-): the library says so.
            let refused = try bus.runAsNobody("notifyutil", ["-p", "com.apple.system.timezone"])
            #expect(refused.status != 0 && refused.err.contains("reserved by notify.conf"), "\(refused)")
            // daemon (uid 1, group 1) may not post clock_set (rwrwr- for group 65534).
            let refused2 = try bus.runAs(SystemLikeBus.third, "notifyutil", ["-p", "com.apple.system.clock_set"])
            #expect(refused2.status != 0 && refused2.err.contains("reserved by notify.conf"), "\(refused2)")
            // Forged past the library: 2 + 2 dropped before the sentinel arrives.
            try forge("com.apple.system.timezone", as: SystemLikeBus.nobody)
            try forge("com.apple.system.clock_set", as: SystemLikeBus.third)
            try repeatUntil("the observer to drop the four forged posts", action: {
                let r = try bus.runAsRoot("notifyutil", ["-p", "sentinel"])
                guard r.status == 0 else { throw TestFailure("notifyutil -p sentinel: \(r.err)") }
            }, done: { guardian.lines.contains("sentinel rejected=4") })
            #expect(!guardian.lines.contains { $0.hasPrefix("com.apple.system.") }, "\(guardian.lines)")

            // The rightful posters: root for everything, nobody (group 65534) for clock_set by the
            // group's w bit, and anyone for a reserve whose mode lets others write.
            #expect(try bus.runAsRoot("notifyutil", ["-p", "com.apple.system.timezone"]).status == 0)
            #expect(try bus.runAsNobody("notifyutil", ["-p", "com.apple.system.clock_set"]).status == 0)
            #expect(try bus.runAs(SystemLikeBus.third, "notifyutil", ["-p", "test.everyone.x"]).status == 0)
            try guardian.waitForLine("com.apple.system.timezone rejected=4")
            try guardian.waitForLine("com.apple.system.clock_set rejected=4")
            try guardian.waitForLine("test.everyone.x rejected=4")
            // The receiver said the bad line with its file and number once, and applied the others.
            try guardian.waitForStderr("\(conf):5: reserve: 'rwx---' is not a mode")
        }

        @Test("on the fast path, the socket's uid and gid decide: nobody's forged frame of a root name is rejected, its plain one delivered directly, its group's clock_set delivered")
        func reservedFastPath() throws {
            let observer = try ChildProcess("cnotify-probe", ["fp-peer"], environment: bus.environment, stdin: true)
            defer { observer.kill() }
            try observer.waitForLine("ready")
            for name in ["com.apple.system.timezone", "fp.plain", "com.apple.system.clock_set", "test.wheel.x"] {
                _ = try command(observer, "observe \(name)") { $0 == "observing \(name)" }
            }
            // Frames written by hand as nobody (uid and gid 65534), with no bus copy: the root
            // name is rejected; so is test.wheel.x, which group 0 may write and nobody's group may
            // not; the plain name is taken, and so is clock_set, which nobody's group may write.
            let forger = try ChildProcess("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "--",
                                                               ChildProcess.productsDirectory + "/cnotify-probe", "fp-forge", "-",
                                                               "com.apple.system.timezone", "test.wheel.x", "com.apple.system.clock_set",
                                                               "fp.plain"],
                                          environment: bus.environment, stdin: true)
            defer { forger.kill() }
            _ = try forger.waitForLine { $0.hasPrefix("sent 4 to ") }
            try observer.waitForLine { $0 == "got fp.plain 1" } // the last one sent: the others were read before it
            #expect(!observer.lines.contains { $0.hasPrefix("got com.apple.system.timezone") }, "\(observer.lines)")
            #expect(!observer.lines.contains { $0.hasPrefix("got test.wheel.x") }, "the socket's gid is 65534, not 0: \(observer.lines)")
            #expect(observer.lines.filter { $0 == "got com.apple.system.clock_set 1" }.count == 1,
                    "nobody's group may write clock_set: \(observer.lines)")
            let seen = try stats(observer)
            #expect(seen["rejected"]! == 2, "\(seen)")
            let delivered = observer.lines.filter { $0.hasPrefix("got com.apple.system.clock_set") }.count
            // nobody's group (65534) may post clock_set (rwrwr-): through the library, directly.
            let poster = try ChildProcess("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "--",
                                                               ChildProcess.productsDirectory + "/cnotify-probe", "fp-peer"],
                                          environment: bus.environment, stdin: true)
            defer { poster.kill() }
            try poster.waitForLine("ready")
            _ = try command(poster, "post com.apple.system.clock_set 1") { $0.hasPrefix("posted com.apple.system.clock_set 1 ") }
            try repeatUntil("the library's clock_set post", action: {}, done: {
                observer.lines.filter { $0.hasPrefix("got com.apple.system.clock_set") }.count > delivered
            })
            #expect(try stats(observer)["rejected"]! == 2, "its direct copy is not taken for a forgery")
            // And refused by the library for a name its mode does not give nobody.
            try poster.write("post com.apple.system.timezone 1\n")
            #expect(try poster.waitForExit() == 1)
            #expect(poster.stderr.contains("post: Not Authorized"), "\(poster.stderr)")
            #expect(!observer.lines.contains { $0.hasPrefix("got com.apple.system.timezone") }, "\(observer.lines)")
        }

        /// A process of nobody's whose supplementary groups are 4242: `test.group.` lets group 4242
        /// read and write it.
        private func inGroup4242(_ arguments: [String]) throws -> ChildProcess {
            try ChildProcess("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--groups=4242", "--",
                                                  ChildProcess.productsDirectory + "/cnotify-probe"] + arguments,
                             environment: bus.environment, stdin: true)
        }

        /// An fp-peer in direct-only mode, observing `names`.
        private func directPeer(_ child: ChildProcess, observing names: [String]) throws {
            try child.waitForLine("ready")
            _ = try command(child, "fast direct") { $0 == "fast direct" }
            for name in names { _ = try command(child, "observe \(name)") { $0 == "observing \(name)" } }
        }

        /// A root fp-peer with the fast path off (the bus path alone), observing `names`.
        private func busObserver(observing names: [String]) throws -> ChildProcess {
            let observer = try ChildProcess("cnotify-probe", ["fp-peer"], environment: bus.environment, stdin: true)
            try observer.waitForLine("ready")
            _ = try command(observer, "fast off") { $0 == "fast off" }
            for name in names { _ = try command(observer, "observe \(name)") { $0 == "observing \(name)" } }
            return observer
        }

        /// A first post starts a poster's discovery; then it waits for `peers` connections.
        private func connect(_ poster: ChildProcess, peers: Int) throws {
            _ = try command(poster, "post fp.warm 1") { $0.hasPrefix("posted fp.warm 1 ") }
            _ = try command(poster, "peers \(peers)") { $0 == "peers \(peers)" }
        }

        @Test("on the fast path every group the kernel gives decides, supplementary ones too: direct only, a post of a group's name from a member reaches an observer, and a member observer gets a group name's post")
        func supplementaryGroups() throws {
            // The poster is the member: the observer (root) must take its direct copy.
            let observer = try ChildProcess("cnotify-probe", ["fp-peer"], environment: bus.environment, stdin: true)
            defer { observer.kill() }
            try directPeer(observer, observing: ["test.group.a"])
            let member = try inGroup4242(["fp-peer"])
            defer { member.kill() }
            try directPeer(member, observing: ["test.group.b"])
            try connect(member, peers: 1)
            _ = try command(member, "post test.group.a 1") { $0.hasPrefix("posted test.group.a 1 ") }
            try observer.waitForLine("got test.group.a 1", timeout: 20)
            #expect(try stats(observer)["rejected"]! == 0, "a member's direct copy is not a forgery")
            // The observer is the member: a root poster must send it its direct copy, though another
            // observer (root's) took one and no bus copy goes out.
            let poster = try ChildProcess("cnotify-probe", ["fp-peer"], environment: bus.environment, stdin: true)
            defer { poster.kill() }
            try directPeer(poster, observing: [])
            _ = try command(observer, "observe test.group.b") { $0 == "observing test.group.b" }
            try connect(poster, peers: 2)
            _ = try command(poster, "post test.group.b 1") { $0.hasPrefix("posted test.group.b 1 ") }
            try observer.waitForLine("got test.group.b 1", timeout: 20)
            try member.waitForLine("got test.group.b 1", timeout: 20)
        }

        @Test("by the bus a post of a group's name from a member in it only through a supplementary group reaches an observer: its credential proves the uid and gid, the bus the other groups")
        func supplementaryGroupOnTheBus() throws {
            let observer = try busObserver(observing: ["test.group.d"])
            defer { observer.kill() }
            let member = try inGroup4242(["fp-peer"])
            defer { member.kill() }
            try member.waitForLine("ready")
            _ = try command(member, "fast off") { $0 == "fast off" }
            _ = try command(member, "post test.group.d 1") { $0.hasPrefix("posted test.group.d 1 ") }
            try observer.waitForLine("got test.group.d 1", timeout: 20)
            #expect(try stats(observer)["rejected"]! == 0, "a member's post is not a forgery")
        }

        @Test("a post of a group's name left by a member that has exited (notifyutil -p) is delivered: its credential carries the group it is in only through a supplementary group")
        func departedSupplementaryGroupPoster() throws {
            let observer = try busObserver(observing: ["test.group.e"])
            defer { observer.kill() }
            // The observer reads the post only once its poster is gone: the bus can no longer say
            // who it was, and the credential is all the proof there is.
            observer.kill(SIGSTOP)
            let posted = try run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--groups=4242", "--",
                                                       ChildProcess.productsDirectory + "/notifyutil", "-p", "test.group.e"],
                                 environment: bus.environment.merging(["HOME": "/nonexistent"]) { $1 })
            observer.kill(SIGCONT)
            #expect(posted.status == 0, "notifyutil -p as a member: \(posted.err)")
            try observer.waitForLine(timeout: 20) { $0.hasPrefix("got test.group.e ") }
            #expect(try stats(observer)["rejected"]! == 0, "a member's post is not a forgery")
        }

        @Test("a member in 101 supplementary groups, the reserve's group last, may post the group's name, and its post is taken with its credential and without one (the bus's every group)")
        func memberInManyGroups() throws {
            let observer = try busObserver(observing: ["test.group.f", "test.group.g"])
            defer { observer.kill() }
            // Groups come in ascending order: 4242 is the 102nd of the process's groups.
            let groups = (Array(100..<200) + [4242]).map(String.init).joined(separator: ",")
            let member = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--groups=\(groups)", "--"]
            let posted = try run(member[0], Array(member.dropFirst()) + [ChildProcess.productsDirectory + "/notifyutil", "-p", "test.group.f"],
                                 environment: bus.environment.merging(["HOME": "/nonexistent"]) { $1 })
            #expect(posted.status == 0, "notifyutil -p as a member in 101 groups: \(posted.err)")
            try observer.waitForLine(timeout: 20) { $0.hasPrefix("got test.group.f ") }
            // No credential: the observer asks the bus while the poster stays connected.
            let raw = try ChildProcess(member[0], Array(member.dropFirst()) + [ChildProcess.productsDirectory + "/cnotify-probe", "raw-post", "1", "test.group.g"],
                                       environment: bus.environment, stdin: true)
            defer { raw.kill() }
            try raw.waitForLine("sent 1")
            try observer.waitForLine(timeout: 20) { $0.hasPrefix("got test.group.g ") }
            #expect(try stats(observer)["rejected"]! == 0, "a member's posts are no forgeries")
            raw.closeStdin()
        }

        @Test("a poster in more groups than a connection keeps (32), allowed a reserved name only through a group cut off, is no forger: its direct copy is set aside uncounted, and its bus copy delivers the post once")
        func cutPosterIsNoForger() throws {
            let observer = try ChildProcess("cnotify-probe", ["fp-peer"], environment: bus.environment, stdin: true)
            defer { observer.kill() }
            try directPeer(observer, observing: ["test.group.c"])
            // The kernel gives a socket's supplementary groups in ascending order: with 40 below 4242,
            // the observer keeps nobody's gid and 100...130, and 4242 is cut off.
            let groups = (Array(100..<140) + [4242]).map(String.init).joined(separator: ",")
            let member = try ChildProcess("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--groups=\(groups)", "--",
                                                               ChildProcess.productsDirectory + "/cnotify-probe", "fp-peer"],
                                          environment: bus.environment, stdin: true)
            defer { member.kill() }
            try directPeer(member, observing: [])
            try connect(member, peers: 1)
            _ = try command(member, "post test.group.c 1") { $0.hasPrefix("posted test.group.c 1 ") }
            try observer.waitForLine("got test.group.c 1", timeout: 20)
            let seen = try stats(observer)
            #expect(seen["rejected"]! == 0, "a poster whose allowing group was not kept is not a forger: \(seen)")
            #expect(seen["delivered"]! == 1 && seen["fast_delivered"]! == 0, "delivered once, by the bus copy: \(seen)")
            #expect(try stats(member)["bus_kept"]! >= 1, "its bus copy went out though the observer took a direct copy")
        }

        @Test("a poster's lane follows notify.conf: once a name is reserved, nobody's next frame of it on the same connection is rejected, though the frames before were taken")
        func laneFollowsTheConf() throws {
            let observer = try ChildProcess("cnotify-probe", ["fp-peer"], environment: bus.environment, stdin: true)
            defer { observer.kill() }
            try observer.waitForLine("ready")
            for name in ["test.later.x", "fp.plain"] {
                _ = try command(observer, "observe \(name)") { $0 == "observing \(name)" }
            }
            let forger = try ChildProcess("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "--",
                                                               ChildProcess.productsDirectory + "/cnotify-probe", "fp-forge", "-",
                                                               "test.later.x", "+"],
                                          environment: bus.environment, stdin: true)
            defer { forger.kill() }
            _ = try forger.waitForLine { $0.hasPrefix("sent 1 to ") }
            try observer.waitForLine("got test.later.x 1")
            // The same name again on the same connection: the lane's case.
            try forger.write("test.later.x\n")
            try observer.waitForLine("got test.later.x 2")
            // Reserved for root from now on; every process looks at its notify.conf at most a second apart.
            try (Self.text + "\nreserve test.later. 0 0 rwr-r-\n").write(toFile: conf, atomically: true, encoding: .utf8)
            chmod(conf, 0o644)
            try repeatUntil(timeout: 20, interval: 0.2, "the observer to reject nobody's frame of test.later.x", action: {
                try forger.write("test.later.x\n")
            }, done: { (try? stats(observer)["rejected"]) ?? 0 >= 1 })
            // From then on none is taken: a frame of it, then one of a plain name, read in order.
            let taken = observer.lines.filter { $0.hasPrefix("got test.later.x") }.count
            try forger.write("test.later.x\nfp.plain\n")
            _ = try observer.waitForLine { $0.hasPrefix("got fp.plain ") }
            #expect(observer.lines.filter { $0.hasPrefix("got test.later.x") }.count == taken, "\(observer.lines)")
            #expect(try stats(observer)["rejected"]! >= 2)
        }

        @Test("a registration of a name whose r bits leave a user out is NOT_AUTHORIZED, as notifyd answers it")
        func reservedRead() throws {
            let refused = try bus.runAsNobody("notifyutil", ["-w", "test.secret.x"])
            #expect(refused.status != 0 && refused.err.contains("may not observe"), "\(refused)")
            let probe = try bus.runAsNobody("cnotify-probe", ["state", "get", "com.apple.system.lowpowermode"])
            #expect(probe.status == 0, "reading a state is not observing: \(probe)")
        }

        @Test("the state of a reserved name is set only by whom its mode allows; others get NOT_AUTHORIZED and the value stays")
        func reservedState() throws {
            func state(_ uid: UInt32, _ args: [String]) throws -> String {
                let r = uid == 0 ? try bus.runAsRoot("cnotify-probe", ["state"] + args)
                                 : try bus.runAs(uid, "cnotify-probe", ["state"] + args)
                return r.out.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            let name = "com.apple.system.lowpowermode"
            #expect(try state(0, ["set", name, "1"]) == "set \(name): OK")
            #expect(try state(SystemLikeBus.nobody, ["set", name, "0"]).hasPrefix("set \(name): Not Authorized"))
            #expect(try state(SystemLikeBus.nobody, ["get", name]) == "get \(name): OK 1")
            #expect(try state(0, ["get", name]) == "get \(name): OK 1")
            // clock_set's group (65534) may set it (rwrwr-), in gid.65534; daemon (uid 1) may not.
            let clock = "com.apple.system.clock_set"
            #expect(try state(SystemLikeBus.nobody, ["set", clock, "5"]) == "set \(clock): OK")
            #expect(try state(SystemLikeBus.third, ["set", clock, "6"]).hasPrefix("set \(clock): Not Authorized"))
            #expect(try state(0, ["get", clock]) == "get \(clock): OK 5")
            #expect(try state(0, ["set", clock, "7"]) == "set \(clock): OK")
            #expect(try state(SystemLikeBus.nobody, ["get", clock]) == "get \(clock): OK 7")
            #expect(try state(SystemLikeBus.nobody, ["set", clock, "8"]) == "set \(clock): OK")
            #expect(try state(SystemLikeBus.third, ["get", clock]) == "get \(clock): OK 8")
        }

        /// notifyd's _internal_check_access, case by case (docs/PROTOCOL.md "Reserved names").
        static let vectors: [(name: String, uid: UInt32, gid: UInt32, access: String, answer: String)] = [
            ("com.apple.system.timezone", 0, 0, "w", "OK"),                 // root may do anything
            ("com.apple.system.timezone", 65534, 65534, "w", "Not Authorized"),
            ("com.apple.system.timezone", 65534, 65534, "r", "OK"),         // r for others
            ("com.apple.system.clock_set", 65534, 65534, "w", "OK"),        // the deepest reserve: group w
            ("com.apple.system.clock_set", 1, 1, "w", "Not Authorized"),
            ("com.apple.system.clock_setting", 65534, 65534, "w", "OK"),    // a byte prefix, as notifyd
            ("com.apple.systemd", 65534, 65534, "w", "OK"),                 // not under "com.apple.system."
            ("test.everyone.x", 1, 1, "w", "OK"),
            ("test.secret.x", 1, 1, "r", "Not Authorized"),
            ("test.badmode.x", 1, 1, "w", "OK"),                            // its line was skipped
            ("user.uid.65534.x", 65534, 0, "w", "OK"),
            ("user.uid.65534.x", 1, 65534, "w", "Not Authorized"),
            ("plain.name", 1, 1, "w", "OK"),
        ]

        @Test("CNotify_name_access answers as notifyd's access check, vector by vector")
        func accessVectors() throws {
            for v in Self.vectors {
                let r = try run("cnotify-probe", ["access", v.name, String(v.uid), String(v.gid), v.access], environment: bus.environment)
                #expect(r.out == v.answer + "\n", "\(v): \(r)")
            }
        }

        @Test("CNotify_conf_check reads the file as the library does: the bad line named, the rest counted")
        func confCheck() throws {
            let r = try run("cnotify-probe", ["conf-check", conf])
            #expect(r.out == """
                \(conf):5: reserve: 'rwx---' is not a mode (six of r, w or -, as rwr-r-)
                bad=1 reserves=6 monitors=0 sets=0

                """, "\(r)")
            // Files that must not be believed are skipped whole, and said so.
            let dir = bus.directory
            try FileManager.default.createSymbolicLink(atPath: dir + "/link.conf", withDestinationPath: conf)
            try "reserve a. 0 0 rw----\n".write(toFile: dir + "/group-writable.conf", atomically: true, encoding: .utf8)
            chmod(dir + "/group-writable.conf", 0o664)
            try "reserve b. 0 0 rw----\n".write(toFile: dir + "/nobodys.conf", atomically: true, encoding: .utf8)
            chmod(dir + "/nobodys.conf", 0o644)
            chown(dir + "/nobodys.conf", SystemLikeBus.nobody, SystemLikeBus.nobody)
            try String(repeating: "# padding\n", count: 110_000).write(toFile: dir + "/big.conf", atomically: true, encoding: .utf8)
            chmod(dir + "/big.conf", 0o644)
            for (file, why) in [("link.conf", "it is a symbolic link"), ("group-writable.conf", "may be written by group or others: ignored"),
                                ("nobodys.conf", "is owned by uid 65534, not root: ignored"), ("big.conf", "is over 1 MiB: ignored"),
                                ("missing.conf", "cannot be opened: No such file or directory")] {
                let checked = try run("cnotify-probe", ["conf-check", dir + "/" + file])
                #expect(checked.out.hasPrefix("\(dir)/\(file) ") && checked.out.contains(why) && checked.out.hasSuffix("bad=1 reserves=0 monitors=0 sets=0\n"),
                        "\(file): \(checked)")
            }
        }
    }
}

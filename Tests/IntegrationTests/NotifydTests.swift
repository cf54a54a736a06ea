import Foundation
import Testing

/// darwin-notifyd (issue 34): each system event made to happen for real, in a mount, network and UTS
/// namespace of unshare(1) where the daemon runs, and seen by two observers outside it: `notifyutil
/// -w` and `notifyutil -dispatch -w` (notify_register_dispatch). The names are reserved for root
/// by the test's notify.conf, as the shipped one does: the daemon's posts are believed because it
/// is root.
extension IntegrationSuites {
    @Suite("darwin-notifyd: the system's names", .serialized,
           .enabled(if: geteuid() == 0, "needs root: unshare(1) namespaces, mount, ip, hostname and the clock"))
    struct NotifydTests {
        let bus: TestBus
        let dir: String

        init() throws {
            bus = try TestBus()
            dir = bus.directory
        }

        /// The daemon inside `unshare --uts --mount --net`, under a shell that runs each line it
        /// reads on stdin and answers "ok LINE" or "failed LINE: output" (the handshake of each
        /// step). Mounts made there stay there (unshare makes them private).
        private func startNamespace(conf: String) throws -> ChildProcess {
            let script = """
                "$1" --bus "$2" --network-settle 100 --disk-interval 100 --disk-free 1 &
                while IFS= read -r cmd; do
                  if out=$(eval "$cmd" 2>&1); then echo "ok $cmd"; else echo "failed $cmd: $out"; fi
                done
                """
            let child = try ChildProcess("/usr/bin/unshare", ["--uts", "--mount", "--net", "--fork", "--kill-child", "--",
                                                              "/bin/bash", "-c", script, "bash",
                                                              ChildProcess.productsDirectory + "/darwin-notifyd", bus.address],
                                         environment: bus.environment.merging(["DARWIN_NOTIFY_CONF": conf]) { $1 }, stdin: true)
            try child.waitForStderr("ready:")
            return child
        }

        /// Runs `command` in the namespace and waits for its answer.
        private func inNamespace(_ ns: ChildProcess, _ command: String) throws {
            try ns.write(command + "\n")
            let answer = try ns.waitForLine { $0 == "ok " + command || $0.hasPrefix("failed " + command) }
            guard answer.hasPrefix("ok ") else { throw TestFailure(answer) }
        }

        /// Two observers of `names` (notifyutil -w and -dispatch -w), each proved registered by a
        /// sentinel it observes too, posted until both print it.
        private func observers(_ names: [String], conf: String) throws -> [ChildProcess] {
            let sentinel = "nd.test.sentinel"
            let args = (names + [sentinel]).flatMap { ["-w", $0] }
            let environment = bus.environment.merging(["DARWIN_NOTIFY_CONF": conf]) { $1 }
            let plain = try ChildProcess("notifyutil", args, environment: environment)
            let dispatch = try ChildProcess("notifyutil", ["-dispatch"] + args, environment: environment)
            try repeatUntil("both observers to see the sentinel", action: { try notifyutilPost([sentinel], bus: bus) },
                            done: { plain.lines.contains(sentinel) && dispatch.lines.contains(sentinel) })
            return [plain, dispatch]
        }

        private func waitFor(_ name: String, in observers: [ChildProcess], count: Int = 1) throws {
            for o in observers {
                try repeatUntil("\(name) × \(count) at \(o.command)", action: {}, done: { o.lines.filter { $0 == name }.count >= count })
            }
        }

        private func writeConf(_ text: String) throws -> String {
            let path = dir + "/notify.conf"
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            chmod(path, 0o644)
            return path
        }

        @Test("host name, mounts, network, time zone, clock and low disk space: each made to happen, each posted and observed")
        func systemEvents() throws {
            try FileManager.default.createDirectory(atPath: dir + "/etc", withIntermediateDirectories: false)
            try FileManager.default.createDirectory(atPath: dir + "/mnt", withIntermediateDirectories: false)
            try FileManager.default.createSymbolicLink(atPath: dir + "/etc/localtime", withDestinationPath: "/usr/share/zoneinfo/UTC")
            let conf = try writeConf("""
                reserve com.apple.system. 0 0 rwr-r-
                monitor com.apple.system.timezone \(dir)/etc/localtime
                """)
            let names = ["com.apple.system.hostname", "com.apple.system.kernel.mount", "com.apple.system.kernel.mountupdate",
                         "com.apple.system.kernel.unmount", "com.apple.system.config.network_change", "com.apple.system.timezone",
                         "com.apple.system.clock_set", "com.apple.system.lowdiskspace.user", "com.apple.system.lowdiskspace"]
            let ns = try startNamespace(conf: conf)
            defer { ns.closeStdin(); ns.kill() }
            let watching = try observers(names, conf: conf)
            defer { for o in watching { o.kill() } }

            try inNamespace(ns, "hostname nd-test-\(getpid())")
            try waitFor("com.apple.system.hostname", in: watching)

            try inNamespace(ns, "mount -t tmpfs -o size=1m nd-test \(dir)/mnt")
            try waitFor("com.apple.system.kernel.mount", in: watching)
            try inNamespace(ns, "mount -o remount,size=2m \(dir)/mnt")
            try waitFor("com.apple.system.kernel.mountupdate", in: watching)

            // Full: under the test's 1% threshold (--disk-free 1), posted within a look (100 ms).
            try inNamespace(ns, "dd if=/dev/zero of=\(dir)/mnt/fill bs=64k 2>/dev/null || true")
            try waitFor("com.apple.system.lowdiskspace.user", in: watching)
            try waitFor("com.apple.system.lowdiskspace", in: watching)
            try inNamespace(ns, "umount \(dir)/mnt")
            try waitFor("com.apple.system.kernel.unmount", in: watching)

            // A link, an address and the link up: several rtnetlink messages, one post.
            try inNamespace(ns, "ip link add nd0 type dummy 2>/dev/null || ip link add nd0 type veth peer name nd1; "
                                + "ip addr add 10.251.0.1/24 dev nd0 && ip link set nd0 up")
            try waitFor("com.apple.system.config.network_change", in: watching)
            // The zone link replaced as timedatectl does it (a new link renamed over the old).
            try inNamespace(ns, "ln -s /usr/share/zoneinfo/Europe/Paris \(dir)/etc/lt.tmp && mv -T \(dir)/etc/lt.tmp \(dir)/etc/localtime")
            try waitFor("com.apple.system.timezone", in: watching)
            // The clock set to what it is: a step of microseconds, which cancels the timer all the same.
            try inNamespace(ns, "date -s @$(date +%s.%N) >/dev/null")
            try waitFor("com.apple.system.clock_set", in: watching)

            // One network post for the burst: the daemon counted more than one message in it, and
            // each observer saw it once by the time it saw the later events.
            try repeatUntil("the daemon to say it posted the network change", action: {}, done: {
                ns.stderr.contains("posted com.apple.system.config.network_change")
            })
            let said = ns.stderr.split(separator: "\n").filter { $0.contains("posted com.apple.system.config.network_change") }
            #expect(said.count == 1, "\(said)")
            #expect(said.first.map { !$0.contains("(1 rtnetlink change)") } ?? false, "\(said)")
            for o in watching { #expect(o.lines.filter { $0 == "com.apple.system.config.network_change" }.count == 1, "\(o.lines)") }
        }

        @Test("a bad notify.conf line is named and the rest applies; a changed file applies without a restart and loses no post")
        func configuration() throws {
            let watched = dir + "/watched"
            let conf = try writeConf("""
                monitor nd.test.first \(watched)
                bogus line
                set nd.test.state 42
                """)
            let ns = try startNamespace(conf: conf)
            defer { ns.closeStdin(); ns.kill() }
            #expect(ns.stderr.contains("\(conf):2: unknown keyword 'bogus'"), "\(ns.stderr)")
            #expect(try run("notifyutil", ["-g", "nd.test.state"], environment: bus.environment).out == "nd.test.state 42\n")
            let watching = try observers(["nd.test.first", "nd.test.second"], conf: conf)
            defer { for o in watching { o.kill() } }
            try inNamespace(ns, "echo 1 > \(watched)")
            try waitFor("nd.test.first", in: watching)
            // A second monitor line: the daemon reads the file again (inotify) and says so.
            _ = try writeConf("""
                monitor nd.test.first \(watched)
                monitor nd.test.second \(watched)
                """)
            try repeatUntil("the daemon to read the changed file", action: {}, done: { ns.stderr.contains("notify.conf changed") })
            try inNamespace(ns, "echo 2 > \(watched)")
            try waitFor("nd.test.second", in: watching)
            try waitFor("nd.test.first", in: watching, count: 2)
        }

        @Test("a single user's daemon and observer meet on the bus their processes use by default (here the embedded one), with no --bus")
        func singleUserDefaultBus() throws {
            let runtime = try makeTemporaryDirectory("nd-runtime")
            chmod(runtime, 0o700)
            let watched = dir + "/user-watched"
            let conf = try writeConf("monitor nd.test.user \(watched)\n")
            let env = ["XDG_RUNTIME_DIR": runtime, "DARWIN_NOTIFY_BUS": "embedded", "DARWIN_NOTIFY_STATE_DIR": "",
                       "DARWIN_NOTIFY_CONF": conf]
            defer {
                _ = try? run("notifyutil", ["--bus-stop"], environment: env)
                try? FileManager.default.removeItem(atPath: runtime)
            }
            let daemon = try ChildProcess("darwin-notifyd", [], environment: env)
            defer { daemon.kill() }
            try daemon.waitForStderr("ready:")
            let observer = try ChildProcess("notifyutil", ["-w", "nd.test.user", "-w", "nd.test.user.sentinel"], environment: env)
            defer { observer.kill() }
            try repeatUntil("the observer to see its sentinel", action: {
                _ = try run("notifyutil", ["-p", "nd.test.user.sentinel"], environment: env)
            }, done: { observer.lines.contains("nd.test.user.sentinel") })
            try "x".write(toFile: watched, atomically: false, encoding: .utf8)
            try repeatUntil("the daemon's post on the embedded bus", action: {}, done: { observer.lines.contains("nd.test.user") })
        }

        @Test("systemd-hostnamed's and timedated's changes are posted, and the same signal forged by a connection that does not own the service's name is not")
        func systemdServices() throws {
            let conf = try writeConf("reserve com.apple.system. 0 0 rwr-r-\n")
            let env = bus.environment.merging(["DARWIN_NOTIFY_CONF": conf]) { $1 }
            let daemon = try ChildProcess("darwin-notifyd", ["--bus", bus.address, "--system-bus", bus.address], environment: env)
            defer { daemon.kill() }
            try daemon.waitForStderr("ready:")
            let watching = try observers(["com.apple.system.hostname", "com.apple.system.timezone"], conf: conf)
            defer { for o in watching { o.kill() } }
            let script = BuildSuites.InstallTests.root + "/Tests/Fixtures/fake_systemd_service.py"
            for (service, path, key, name) in [("org.freedesktop.hostname1", "/org/freedesktop/hostname1", "StaticHostname", "com.apple.system.hostname"),
                                               ("org.freedesktop.timedate1", "/org/freedesktop/timedate1", "Timezone", "com.apple.system.timezone")] {
                // Forged first, by a connection that does not own the name: the bus does not pass it on.
                let forged = try run("/usr/bin/python3", [script, bus.address, "forge", service, path, key, "forged"])
                #expect(forged.out == "forged\n", "\(forged)")
                let owner = try ChildProcess("/usr/bin/python3", [script, bus.address, "own", service, path, key, "real"], stdin: true)
                defer { owner.kill() }
                try owner.waitForLine("ready")
                try owner.write("emit\n")
                try owner.waitForLine("emitted 1")
                try waitFor(name, in: watching)
                // The daemon says a post once the bus has it; the fast path may deliver it before.
                try repeatUntil("the daemon to say it posted \(name)", action: {}, done: { daemon.stderr.contains("posted \(name) (systemd-") })
                #expect(daemon.stderr.components(separatedBy: "posted \(name) (systemd-").count == 2, "\(daemon.stderr)")
                owner.closeStdin()
                _ = try owner.waitForExit()
            }
        }
    }
}

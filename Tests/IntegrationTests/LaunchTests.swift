import DarwinNotify
import Foundation
import Testing

/// Launch on post (issue 37): darwin-notifyd's launcher on a private bus with D-Bus activation (a
/// service directory of the test's own), its declarations in a directory of the test's own. The
/// job is `cnotify-probe launch-job LOG`, which writes each step to LOG: `started`, `checked-in`,
/// `event NAME COUNT SERIAL`. A test waits on the launcher's own lines (stderr) and the job's log;
/// every job it started is killed by the pids of its log.
extension IntegrationSuites {
    @Suite("launch on post: darwin-notifyd's launcher", .serialized)
    struct LaunchTests {
        /// A bus that activates the services of `services/`, open to every uid (a user's launcher
        /// runs as nobody in one test).
        final class ActivationBus: Sendable {
            let directory: String
            let address: String
            let daemon: ChildProcess
            init() throws {
                directory = try makeTemporaryDirectory("launch")
                chmod(directory, 0o755)
                address = "unix:path=\(directory)/bus"
                for sub in ["services", "launch.d", "logs", "state"] {
                    try FileManager.default.createDirectory(atPath: directory + "/" + sub, withIntermediateDirectories: false)
                }
                chmod(directory + "/launch.d", 0o755)
                chmod(directory + "/logs", 0o777)
                chmod(directory + "/state", 0o1777)
                let policy = """
                    <policy context="default"><allow user="*"/><allow own="*"/><allow send_destination="*"/>
                    <allow receive_sender="*"/><allow send_type="method_call"/></policy>
                    """
                let config = try EmbeddedBus.configuration(listen: address, policy: policy)
                    .replacingOccurrences(of: "</busconfig>", with: "<servicedir>\(directory)/services</servicedir></busconfig>")
                try config.write(toFile: directory + "/bus.conf", atomically: true, encoding: .utf8)
                daemon = try TestBus.startDaemon(config: directory + "/bus.conf")
            }
            var environment: [String: String] { ["DARWIN_NOTIFY_BUS": address, "DARWIN_NOTIFY_STATE_DIR": directory + "/state"] }
            deinit {
                daemon.kill()
                try? FileManager.default.removeItem(atPath: directory)
            }
        }

        let bus: ActivationBus
        let probe = ChildProcess.productsDirectory + "/cnotify-probe"
        init() throws { bus = try ActivationBus() }

        var launchDir: String { bus.directory + "/launch.d" }
        func log(_ name: String) -> String { bus.directory + "/logs/" + name + ".log" }

        /// Writes a declaration as an editor would (a new file renamed over), root's and 0644.
        func declare(_ label: String, _ text: String, mode: mode_t = 0o644, in dir: String? = nil) throws {
            let path = (dir ?? launchDir) + "/" + label + ".conf"
            try text.write(toFile: path + ".tmp", atomically: false, encoding: .utf8)
            chmod(path + ".tmp", mode)
            guard rename(path + ".tmp", path) == 0 else { throw TestFailure("rename \(path): \(errno)") }
        }

        func launcher(_ extra: [String] = [], user: Bool = true) throws -> ChildProcess {
            let child = try ChildProcess("darwin-notifyd", (user ? ["--user"] : [])
                                             + ["--bus", bus.address, "--launch-dir", launchDir] + extra,
                                         environment: bus.environment)
            try child.waitForStderr(user ? "ready: the launcher" : "ready:")
            return child
        }

        func lines(_ log: String) -> [String] {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }

        func events(_ log: String) -> [String] { lines(log).filter { $0.hasPrefix("event ") } }

        func waitFor(_ what: String, timeout: TimeInterval = 20, _ done: () -> Bool) throws {
            try repeatUntil(timeout: timeout, interval: 0.02, what, action: {}, done: done)
        }

        /// Kills every job a log says started (each in a session of its own).
        func stopJobs(_ logs: [String]) {
            for log in logs {
                for line in lines(log) where line.hasPrefix("started pid=") {
                    let pid = Int32(line.dropFirst("started pid=".count).prefix { $0.isNumber }) ?? 0
                    if pid > 0 { kill(-pid, SIGKILL); kill(pid, SIGKILL) }
                }
            }
        }

        func post(_ names: [String]) throws {
            let result = try run("notifyutil", ["-z", "0"] + names.flatMap { ["-p", $0] }, environment: bus.environment)
            guard result.status == 0 else { throw TestFailure("notifyutil failed: \(result.err)") }
        }

        func list() throws -> String {
            let r = try run("darwin-notifyd", ["--list", "--launch-bus", bus.address], environment: bus.environment)
            guard r.status == 0 else { throw TestFailure("--list failed (\(r.status)): \(r.err)") }
            return r.out
        }

        @Test("a job not running starts on a post of its name, and its handler gets exactly that event (exec and D-Bus activation)")
        func coldStart() throws {
            let execLog = log("exec"), serviceLog = log("service")
            defer { stopJobs([execLog, serviceLog]) }
            try declare("com.example.exec-job", "exec \(probe) launch-job \(execLog)\nnotification com.example.launch.exec\n")
            try """
                [D-BUS Service]
                Name=com.example.LaunchJob
                Exec=\(probe) launch-job \(serviceLog) --job com.example.service-job

                """.write(toFile: bus.directory + "/services/com.example.LaunchJob.service", atomically: true, encoding: .utf8)
            try declare("com.example.service-job", "service com.example.LaunchJob\nnamespace com.example.launch.svc\n")
            let launcher = try launcher()
            defer { launcher.kill() }
            #expect(lines(execLog).isEmpty && lines(serviceLog).isEmpty, "nothing runs before a post")

            try post(["com.example.launch.exec"])
            try waitFor("the exec job's event") { !events(execLog).isEmpty }
            try post(["com.example.launch.svc.changed"])
            try waitFor("the service job's event") { !events(serviceLog).isEmpty }
            // The launcher's log and List agree: one start each; a second post reaches the running job.
            try post(["com.example.launch.exec"])
            try waitFor("the second event") { events(execLog).count == 2 }
            let pid = lines(execLog).first { $0.hasPrefix("started") }.map { String($0.split(separator: " ")[1]) } ?? "?"
            #expect(events(execLog) == ["event com.example.launch.exec 1 1 \(pid)", "event com.example.launch.exec 1 2 \(pid)"])
            let serviceEvents: [String] = events(serviceLog).map { (line: String) -> String in line.split(separator: " ").prefix(4).joined(separator: " ") }
            #expect(serviceEvents == ["event com.example.launch.svc.changed 1 1"])
            #expect(lines(execLog).filter { $0.hasPrefix("started") }.count == 1)
            #expect(lines(serviceLog).filter { $0.hasPrefix("started") }.count == 1)
            let table = try list()
            #expect(table.contains("job=com.example.exec-job kind=exec state=checked-in"), "\(table)")
            #expect(table.contains("job=com.example.service-job kind=service state=checked-in"), "\(table)")
            #expect(table.components(separatedBy: "starts=1 ").count == 3, "\(table)")
        }

        @Test("the launcher lives on once nobody reads its stderr: SIGPIPE is ignored, as Apple's notifyd does, and the next job still starts")
        func stderrReaderGone() throws {
            let jobLog = log("unread")
            defer { stopJobs([jobLog]) }
            // Its stderr is a FIFO this test reads until the ready line and then closes: every
            // later line goes to a pipe with no reader (a log reader that died), as a process
            // started from a shell with SIGPIPE's default action.
            let fifo = bus.directory + "/stderr.fifo"
            #expect(mkfifo(fifo, 0o600) == 0)
            let reader = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
            try #require(reader >= 0)
            var readerOpen = true
            defer { if readerOpen { close(reader) } }
            let launcher = try ChildProcess("/bin/sh", ["-c", "exec \"$0\" --user --bus \"$1\" --launch-dir \"$2\" 2>\"$3\"",
                                                        ChildProcess.productsDirectory + "/darwin-notifyd", bus.address, launchDir, fifo],
                                            environment: bus.environment)
            defer { launcher.kill() }
            var said = ""
            try repeatUntil(timeout: 20, interval: 0.01, "the launcher's ready line on the FIFO", action: {
                var buffer = [UInt8](repeating: 0, count: 4096)
                let got = read(reader, &buffer, buffer.count)
                if got > 0 { said += String(decoding: buffer[..<got], as: UTF8.self) }
            }, done: { said.contains("ready: the launcher") })
            close(reader)
            readerOpen = false
            // Its next line ("… declared") is written to the dead pipe; then the job must start.
            try declare("unread", "exec \(probe) launch-job \(jobLog)\nnotification com.example.unread\n")
            try repeatUntil(timeout: 20, interval: 0.05, "the job to start on a post", action: { try post(["com.example.unread"]) },
                            done: { !events(jobLog).isEmpty })
            #expect(launcher.isRunning)
        }

        @Test("100 posts while the job starts: every one arrives once and in order, then the live ones; a job that runs gets nothing twice")
        func postsWhileStarting() throws {
            let jobLog = log("burst"), hold = bus.directory + "/logs/go"
            defer { stopJobs([jobLog]) }
            try declare("burst", "exec \(probe) launch-job \(jobLog) --hold \(hold)\nnotification com.example.burst\nnamespace com.example.other\n")
            let launcher = try launcher()
            defer { launcher.kill() }
            try post(["com.example.burst"])
            try waitFor("the job started") { lines(jobLog).contains { $0.hasPrefix("started") } }
            // While it starts (it has not checked in: it waits for `hold`): 100 posts, two names.
            try post((1 ... 100).map { $0 % 10 == 0 ? "com.example.other.n\($0)" : "com.example.burst" })
            try waitFor("the launcher to queue them") { (try? list())?.contains("queued=101 ") ?? false }
            _ = FileManager.default.createFile(atPath: hold, contents: nil)
            try waitFor("101 events") { events(jobLog).count == 101 }
            // Live, after the check-in: two more.
            try post(["com.example.other.live", "com.example.burst"])
            try waitFor("103 events") { events(jobLog).count == 103 }
            let got = events(jobLog).map { $0.split(separator: " ") }
            let expected = ["com.example.burst"] + (1 ... 100).map { $0 % 10 == 0 ? "com.example.other.n\($0)" : "com.example.burst" }
                + ["com.example.other.live", "com.example.burst"]
            #expect(got.map { String($0[1]) } == expected)
            #expect(got.map { String($0[2]) } == Array(repeating: "1", count: 103), "each post its own event while the job runs")
            #expect(got.map { UInt64($0[3]) ?? 0 } == Array(1 ... 103), "each serial once, in order")
            #expect(lines(jobLog).filter { $0.hasPrefix("started") }.count == 1, "one process")
        }

        @Test("while no job runs, posts coalesce per name (a count); a job that exits at once is throttled: a flood of posts is not a flood of processes")
        func throttleAndCoalesce() throws {
            let jobLog = log("crash")
            defer { stopJobs([jobLog]) }
            try declare("crash", "exec \(probe) launch-job \(jobLog) --exit-at-once\nnotification com.example.crash\nthrottle 2\n")
            let launcher = try launcher()
            defer { launcher.kill() }
            let start = Date()
            var posted = 0
            while Date().timeIntervalSince(start) < 10 {
                try post(["com.example.crash", "com.example.crash"])
                posted += 2
                usleep(100_000) // the flood's pace: about 20 posts a second for 10 s
            }
            let starts = lines(jobLog).filter { $0.hasPrefix("started") }.count
            // Starts at least 2 s apart: at most 6 in 10 s (0, 2, 4, 6, 8, 10), for about 200 posts.
            #expect(starts >= 3 && starts <= 6, "\(starts) starts for \(posted) posts")
            #expect(launcher.stderr.contains("launcher: crash is throttled: next start in"), "\(launcher.stderr)")
            // Nothing was taken: what is queued is one event per name, its count every post so far.
            let table = try list()
            #expect(table.contains("queued=1 delivered=0"), "\(table)")
            #expect(table.contains("coalesced=\(posted - 1) "), "\(table)")
        }

        @Test("a job that never checks in is stopped after its checkin time, and counted; after 5 such starts only a new post starts it")
        func neverChecksIn() throws {
            let jobLog = log("mute")
            defer { stopJobs([jobLog]) }
            try declare("mute", "exec \(probe) launch-job \(jobLog) --no-check-in\nnotification com.example.mute\nthrottle 0\ncheckin 1\n")
            let launcher = try launcher()
            defer { launcher.kill() }
            try post(["com.example.mute"])
            try waitFor("stopped", timeout: 10) { launcher.stderr.contains("launcher: mute did not check in within 1 s: stopped") }
            try waitFor("its end") { launcher.stderr.contains("launcher: mute ended (signal 15) without checking in") }
            // Its event waits: the job is started again (throttle 0) until 5 starts failed in a row.
            try waitFor("held back after 5", timeout: 30) { launcher.stderr.contains("5 times in a row: started again only by a new post") }
            #expect(lines(jobLog).filter { $0.hasPrefix("started") }.count == 5)
            let table = try list()
            #expect(table.contains("job=mute kind=exec state=held-back starts=5 "), "\(table)")
            #expect(table.contains("queued=1 "), "\(table)")
            try post(["com.example.mute"])
            try waitFor("a sixth start on a new post") { lines(jobLog).filter { $0.hasPrefix("started") }.count == 6 }
        }

        @Test("a declaration added, then removed, while the launcher runs")
        func addedAndRemoved() throws {
            let jobLog = log("late"), witnessLog = log("witness")
            defer { stopJobs([jobLog, witnessLog]) }
            try declare("witness", "exec \(probe) launch-job \(witnessLog)\nnotification com.example.witness\n")
            let launcher = try launcher()
            defer { launcher.kill() }
            try post(["com.example.late"])
            try declare("late", "exec \(probe) launch-job \(jobLog) --exit-after 1\nnotification com.example.late\n")
            try waitFor("declared") { launcher.stderr.contains("launcher: late declared") }
            #expect(lines(jobLog).isEmpty, "a post before the declaration starts nothing")
            try post(["com.example.late"])
            try waitFor("its event") { events(jobLog).count == 1 }
            try waitFor("its end") { launcher.stderr.contains("launcher: late ended (exit 0)") }
            try FileManager.default.removeItem(atPath: launchDir + "/late.conf")
            try waitFor("removed") { launcher.stderr.contains("launcher: late removed") }
            // The removed name, then the witness's, from one poster: the launcher takes them in
            // that order, so once the witness has its event the removed job's post was seen.
            try post(["com.example.late", "com.example.witness"])
            try waitFor("the witness's event") { events(witnessLog).count == 1 }
            #expect(lines(jobLog).filter { $0.hasPrefix("started") }.count == 1, "no start after the removal")
            #expect(!(try list()).contains("job=late "))
        }

        @Test("declaration files someone else could change are refused with a clear message; the others apply")
        func refusedFiles() throws {
            let okLog = log("ok")
            defer { stopJobs([okLog]) }
            try declare("ok", "exec \(probe) launch-job \(okLog) --exit-after 1\nnotification com.example.ok\n")
            try declare("open", "exec /bin/true\nnotification com.example.open\n", mode: 0o666)
            try declare("group", "exec /bin/true\nnotification com.example.group\n", mode: 0o664)
            try declare("bad", "exec /bin/true\nnotifcation com.example.bad\n")
            try declare("relative", "exec true\nnotification com.example.rel\n")
            try "exec /bin/true\nnotification com.example.link\n".write(toFile: bus.directory + "/elsewhere.conf", atomically: true, encoding: .utf8)
            symlink(bus.directory + "/elsewhere.conf", launchDir + "/link.conf")
            let asRoot = geteuid() == 0
            if asRoot {
                try declare("theirs", "exec /bin/true\nnotification com.example.theirs\n")
                chown(launchDir + "/theirs.conf", 65534, 65534)
            }
            let launcher = try launcher()
            defer { launcher.kill() }
            let said = launcher.stderr
            #expect(said.contains("open.conf: refused: writable by others (mode 0666): only its owner may change a job's declaration"), "\(said)")
            #expect(said.contains("group.conf: refused: writable by its group (mode 0664)"), "\(said)")
            #expect(said.contains("bad.conf: refused: line 2: unknown keyword 'notifcation'"), "\(said)")
            #expect(said.contains("relative.conf: refused: line 1: exec needs an absolute path"), "\(said)")
            #expect(said.contains("link.conf: refused: a symbolic link"), "\(said)")
            if asRoot { #expect(said.contains("theirs.conf: refused: owned by uid 65534"), "\(said)") }
            #expect(said.contains("1 job declared, \(asRoot ? 6 : 5) files refused"), "\(said)")
            let table = try list()
            #expect(table.split(separator: "\n").filter { $0.hasPrefix("refused ") }.count == (asRoot ? 6 : 5), "\(table)")
            // The refused names start nothing; the good file's does.
            try post(["com.example.open", "com.example.group", "com.example.link", "com.example.ok"])
            try waitFor("the good job's event") { events(okLog).count == 1 }
            #expect(!launcher.stderr.contains("started open") && !launcher.stderr.contains("started link"))
            // Fixed in place (chmod go-w): read again, and believed.
            chmod(launchDir + "/open.conf", 0o644)
            try waitFor("the fixed file believed") { launcher.stderr.contains("launcher: open declared") }
        }

        @Test("a user's declaration cannot start another user's job or a root job; a system declaration runs its job as its `user`",
              .enabled(if: geteuid() == 0, "needs root: runs a user's launcher as nobody through setpriv"))
        func usersStayThemselves() throws {
            let userDir = bus.directory + "/user-launch.d"
            try FileManager.default.createDirectory(atPath: userDir, withIntermediateDirectories: false)
            chown(userDir, 65534, 65534)
            chmod(userDir, 0o755)
            let mine = log("mine"), rooted = log("rooted"), system = log("system")
            defer { stopJobs([mine, rooted, system]) }
            try declare("mine", "exec \(probe) launch-job \(mine) --exit-after 1\nnotification com.example.user.mine\n", in: userDir)
            chown(userDir + "/mine.conf", 65534, 65534)
            try declare("rooted", "exec \(probe) launch-job \(rooted)\nuser root\nnotification com.example.user.rooted\n", in: userDir)
            chown(userDir + "/rooted.conf", 65534, 65534)
            try declare("other", "exec /bin/true\nnotification com.example.user.other\n", in: userDir)
            chown(userDir + "/other.conf", 1, 1)
            // The user's launcher, as nobody, with no session bus of its own: this test's bus.
            let user = try ChildProcess("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "--",
                                                              ChildProcess.productsDirectory + "/darwin-notifyd", "--user",
                                                              "--bus", bus.address, "--launch-dir", userDir],
                                        environment: bus.environment.merging(["HOME": "/nonexistent"]) { $1 })
            defer { user.kill() }
            try user.waitForStderr("ready: the launcher of uid 65534")
            #expect(user.stderr.contains("rooted.conf: refused: user root: a user's declaration runs its job as that user only"), "\(user.stderr)")
            #expect(user.stderr.contains("other.conf: refused: owned by uid 1; this launcher believes only its own user's files and root's"),
                    "\(user.stderr)")
            try post(["com.example.user.rooted", "com.example.user.mine"])
            try waitFor("the user's job") { events(mine).count == 1 }
            #expect(lines(mine).first?.hasSuffix("uid=65534") == true, "\(lines(mine))")
            #expect(lines(rooted).isEmpty)
            user.kill()
            _ = try user.waitForExit() // its connection, and the launcher's name, gone
            // The system launcher (root) runs a job as the user its declaration names.
            try declare("system", "exec \(probe) launch-job \(system) --exit-after 1\nuser nobody\nnotification com.example.user.system\n")
            let root = try ChildProcess("darwin-notifyd", ["--bus", bus.address, "--launch-dir", launchDir, "--network-settle", "0"],
                                        environment: bus.environment)
            defer { root.kill() }
            try root.waitForStderr("ready:")
            try post(["com.example.user.system"])
            try waitFor("the system job") { events(system).count == 1 }
            #expect(lines(system).first?.hasSuffix("uid=65534") == true, "\(lines(system))")
        }

        @Test("a check-in that is not the job's is refused: no such job, another process, a second check-in")
        func checkInRefused() throws {
            let jobLog = log("real")
            defer { stopJobs([jobLog]) }
            try declare("real", "exec \(probe) launch-job \(jobLog) --twice\nnotification com.example.real\n")
            let launcher = try launcher()
            defer { launcher.kill() }
            let env = bus.environment.merging(["DARWIN_NOTIFY_LAUNCHER_BUS": bus.address]) { $1 }
            var r = try run(probe, ["launch-job", log("nosuch"), "--job", "nosuch"], environment: env)
            #expect(r.status == 2)
            #expect(lines(log("nosuch")).last == "check-in-failed Invalid Name: the launcher on \(bus.address) declares no job 'nosuch'")
            // The job exists but this process is not it (no token; a forged one).
            r = try run(probe, ["launch-job", log("impostor"), "--job", "real"],
                        environment: env.merging(["DARWIN_NOTIFY_LAUNCH_TOKEN": String(repeating: "0", count: 32)]) { $1 })
            #expect(r.status == 2)
            #expect(lines(log("impostor")).last?.hasPrefix("check-in-failed Not Authorized: not the job 'real'") == true,
                    "\(lines(log("impostor")))")
            // No launcher on a bus.
            let other = try TestBus()
            r = try run(probe, ["launch-job", log("nolauncher"), "--job", "real", "--bus", other.address], environment: env)
            #expect(lines(log("nolauncher")).last == "check-in-failed Server Not Found: no launcher (darwin-notifyd) runs on \(other.address)")
            // The real job still gets its event, and the impostors took none.
            try post(["com.example.real"])
            try waitFor("the job's event") { events(jobLog).count == 1 }
            #expect(events(jobLog).first?.hasPrefix("event com.example.real 1 1 ") == true)
            // Once per process, as xpc_set_event_stream_handler.
            try waitFor("the second check-in's answer") { lines(jobLog).contains { $0.hasPrefix("second-check-in") } }
            #expect(lines(jobLog).contains("second-check-in Invalid Request: this process has checked in already (once per process, as xpc_set_event_stream_handler)"),
                    "\(lines(jobLog))")
        }

        @Test("the wire as docs/PROTOCOL.md writes it: Describe, a forged Take and a job's own Take, with dbus-send")
        func wireFromTheDocs() throws {
            let out = log("wire"), script = bus.directory + "/wire-job.sh"
            // A job that is a shell script: its check-in is one dbus-send, with what its environment says.
            try """
                #!/bin/sh
                echo "started pid=$$ uid=$(id -u)" >> \(out)
                dbus-send --bus="$DARWIN_NOTIFY_LAUNCHER_BUS" --print-reply --dest=org.darwinnotify.Launcher \\
                    /org/darwinnotify/Launcher org.darwinnotify.Launcher.Take \\
                    string:"$DARWIN_NOTIFY_JOB" string:"$DARWIN_NOTIFY_LAUNCH_TOKEN" uint32:0 >> \(out) 2>&1

                """.write(toFile: script, atomically: true, encoding: .utf8)
            chmod(script, 0o755)
            defer { stopJobs([out]) }
            try declare("com.example.refresh", "exec \(script)\nnotification com.example.changed\n")
            let launcher = try launcher()
            defer { launcher.kill() }
            func send(_ args: [String]) throws -> (status: Int32, out: String, err: String) {
                try run("/usr/bin/dbus-send", ["--bus=\(bus.address)", "--print-reply", "--dest=org.darwinnotify.Launcher",
                                               "/org/darwinnotify/Launcher"] + args)
            }
            let described = try send(["org.darwinnotify.Launcher.Describe", "string:com.example.refresh"])
            #expect(described.out.contains("string \"exec\"") && described.out.contains("string \"\(script)\""), "\(described)")
            let forged = try send(["org.darwinnotify.Launcher.Take", "string:com.example.refresh",
                                   "string:" + String(repeating: "0", count: 32), "uint32:0"])
            #expect(forged.err.contains("Error org.darwinnotify.Launcher.Error.NotTheJob: only the process the launcher started"), "\(forged)")
            let none = try send(["org.darwinnotify.Launcher.Describe", "string:nosuch"])
            #expect(none.err.contains("Error org.darwinnotify.Launcher.Error.NoSuchJob"), "\(none)")
            try post(["com.example.changed"])
            try waitFor("the script's Take answered") { lines(out).contains { $0.contains("uint64 1") } }
            let answer = lines(out).joined(separator: " ").split(whereSeparator: { $0 == " " }).joined(separator: " ")
            #expect(answer.contains("array [ struct { string \"com.example.changed\" uint32 1 uint64 1 } ]"), "\(answer)")
        }
    }
}

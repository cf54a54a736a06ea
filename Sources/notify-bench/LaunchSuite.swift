import DarwinNotify
import Foundation

/// `launch`: a job's cold start on a post (darwin-notifyd's launcher, darwin-notify-launch(5)),
/// against starting the same program by hand, alternating, each a fresh process. The job is
/// `cnotify-probe launch-job LOG --stamp`, which writes CLOCK_MONOTONIC when its `main` starts and
/// when its handler gets the event; the bench reads the same clock before it acts:
///   - by hand: posix_spawn → the program's `main` (fork and exec, and the dynamic loader);
///   - launched: a post → the job's `main` (the launcher's part: the post reaches it, it forks);
///   - launched: a post → the job's handler (the above, then its check-in and its first Take).
/// Between rounds the launcher is asked (List) until the job is idle again, so every start is cold.
func launchSuite(_ options: Options) throws -> [Metric] {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let dir = NSTemporaryDirectory() + "notify-bench-launch-\(getpid())"
    try FileManager.default.createDirectory(atPath: dir + "/launch.d", withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    chmod(dir, 0o755)
    chmod(dir + "/launch.d", 0o755)
    let probe = Child.siblings + "/cnotify-probe", jobLog = dir + "/job.log", handLog = dir + "/hand.log"
    try "exec \(probe) launch-job \(jobLog) --stamp --exit-after 1\nnotification bench.launch\nthrottle 0\n"
        .write(toFile: dir + "/launch.d/bench.conf", atomically: true, encoding: .utf8)
    chmod(dir + "/launch.d/bench.conf", 0o644)
    let env = ["DARWIN_NOTIFY_BUS": bus.address, "DARWIN_NOTIFY_STATE_DIR": dir + "/state"]
    let launcher = try Child(Child.siblings + "/darwin-notifyd", ["--user", "--bus", bus.address, "--launch-dir", dir + "/launch.d"],
                             environment: env, quiet: true)
    defer { launcher.stop() }
    func list() -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Child.siblings + "/darwin-notifyd")
        p.arguments = ["--list", "--launch-bus", bus.address]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return "" }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return p.terminationStatus == 0 ? String(decoding: data, as: UTF8.self) : ""
    }
    func waitFor(_ what: String, _ done: () -> Bool) throws {
        let deadline = Date().addingTimeInterval(20)
        while !done() {
            if Date() > deadline { throw BenchError("launch: timed out waiting for \(what)") }
            usleep(1000)
        }
    }
    try waitFor("the launcher") { list().contains("job=bench ") }
    func stamps(_ log: String, _ prefix: String) -> [UInt64] {
        ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n")
            .filter { $0.hasPrefix(prefix) }.compactMap { $0.split(separator: "=").last.flatMap { UInt64($0) } }
    }
    func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
    let center = try NotifyCenter(bus: bus.address)
    let runs = max(5, min(options.samples / 10, 60))
    var byHand: [Double] = [], toMain: [Double] = [], toHandler: [Double] = []
    for round in 0 ..< runs {
        // By hand: the same program, to its main.
        var t0 = now()
        var pid: pid_t = 0
        let words: [String] = [probe, "launch-job", handLog, "--stamp", "--exit-at-once"]
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        guard posix_spawn(&pid, probe, nil, nil, argv, environ) == 0 else { throw BenchError("launch: posix_spawn \(probe)") }
        try waitFor("the program started by hand") { stamps(handLog, "started").count == round + 1 }
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        byHand.append(Double(stamps(handLog, "started")[round] &- t0) / 1e6)
        // Launched: a post, to the job's main and to its handler.
        t0 = now()
        try center.post("bench.launch")
        try waitFor("the launched job's event") { stamps(jobLog, "event").count == round + 1 }
        toMain.append(Double(stamps(jobLog, "started")[round] &- t0) / 1e6)
        toHandler.append(Double(stamps(jobLog, "event")[round] &- t0) / 1e6)
        try waitFor("the job to end") { list().contains("state=idle starts=\(round + 1) ") }
    }
    func median(_ v: [Double]) -> Double { let s = v.sorted(); return s[s.count / 2] }
    func p90(_ v: [Double]) -> Double { let s = v.sorted(); return s[min(s.count - 1, s.count * 9 / 10)] }
    let hand = median(byHand)
    return [
        Metric(label: "by hand: spawn → main, median of \(runs)", value: hand, unit: "ms", reference: nil, goal: .none,
               note: String(format: "p90 %.2f ms", p90(byHand))),
        Metric(label: "launched: post → job's main, median", value: median(toMain), unit: "ms", reference: hand, goal: .none,
               note: String(format: "p90 %.2f ms", p90(toMain))),
        Metric(label: "launched: post → job's handler, median", value: median(toHandler), unit: "ms", reference: hand, goal: .none,
               note: String(format: "p90 %.2f ms", p90(toHandler))),
    ]
}

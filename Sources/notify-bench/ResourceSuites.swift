import Foundation

/// `check`: notify_check on an unchanged token; the probe proves "no system call" with seccomp.
func checkSuite(_ options: Options) throws -> [Metric] {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let n = max(options.samples, 1) * 200
    let probe = try Child("cnotify-probe", ["bench-check", "\(n)"], environment: ["DARWIN_NOTIFY_BUS": bus.address])
    let line = try probe.readLine { $0.contains("syscalls=") }
    probe.kill() // its main thread exited in seccomp strict mode; the I/O thread would linger
    guard let ns = Double(line.split(separator: " ")[0]) else { throw BenchError("bad check output: \(line)") }
    return [Metric(label: "notify_check, unchanged token (\(n) calls)", value: ns, unit: "ns", reference: nil,
                   goal: .atMost(100), note: "no system call (seccomp strict)")]
}

/// Resident set size of a process, from /proc (kB).
func residentKilobytes(_ pid: Int32) throws -> Double {
    let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
    guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
          let kb = Double(line.split(separator: " ").dropFirst().first ?? "") else {
        throw BenchError("no VmRSS for pid \(pid)")
    }
    return kb
}

/// `memory`: RSS of an idle observer of 1,000 names against dbus-monitor's RSS on the same bus.
/// The observer is a C program built with cc against a cc-built libCNotify.so, as a C user would
/// build it; the SwiftPM-built probe (which also loads the Swift runtime) is shown for reference.
func memorySuite(_ options: Options) throws -> [Metric] {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let env = ["DARWIN_NOTIFY_BUS": bus.address]
    let observer = try Child(try PlainC.buildObserver(), ["memory.c", "1000"], environment: env)
    defer { observer.stop() }
    _ = try observer.readLine { $0 == "ready" }
    let probe = try Child("cnotify-probe", ["observe-many", "memory.probe", "1000"], environment: env)
    defer { probe.stop() }
    _ = try probe.readLine { $0 == "ready" }
    let monitor = try Child("/usr/bin/dbus-monitor", ["--address", bus.address, "type='signal',path='/org/darwinnotify'"])
    defer { monitor.kill() }
    _ = try monitor.readLine { $0.contains("NameAcquired") || $0.contains("NameLost") } // connected and monitoring
    let ours = try residentKilobytes(observer.pid) / 1024
    let swiftBuilt = try residentKilobytes(probe.pid) / 1024
    let theirs = try residentKilobytes(monitor.pid) / 1024
    return [
        Metric(label: "dbus-monitor, idle", value: theirs, unit: "MiB", reference: nil, goal: .none),
        Metric(label: "C observer of 1,000 names (cc build), idle", value: ours, unit: "MiB", reference: theirs, goal: .atMost(1.3)),
        Metric(label: "same, SwiftPM-built (loads Swift runtime)", value: swiftBuilt, unit: "MiB", reference: theirs, goal: .none),
    ]
}

/// `cli`: wall time of `notifyutil -p` against `dbus-send --type=signal` for the same post,
/// alternating, median of the runs (posix_spawn + waitpid, so the spawner adds little). Executables
/// given with `--cli-extra` join the alternation, as rows of their own against the same dbus-send.
func cliSuite(_ options: Options) throws -> [Metric] {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let runs = max(20, min(options.samples / 30, 300))
    let env = ["DARWIN_NOTIFY_BUS": bus.address]
    let notifyutil = try PlainC.buildNotifyutil()
    defer { try? FileManager.default.removeItem(atPath: (notifyutil as NSString).deletingLastPathComponent) }
    var ours: [Double] = [], theirs: [Double] = []
    var extras = [[Double]](repeating: [], count: options.cliExtras.count)
    for _ in 0..<runs {
        // -z 0: Apple's 100 ms pause after a post is a feature of the tool, not a cost of posting.
        ours.append(try timeCommand(notifyutil, ["-z", "0", "-p", "cli.x"], environment: env))
        theirs.append(try timeCommand("/usr/bin/dbus-send", ["--bus=\(bus.address)", "--type=signal", "/org/darwinnotify",
                                                            "org.darwinnotify.Notify.Post", "string:cli.x"], environment: [:]))
        for (k, path) in options.cliExtras.enumerated() {
            extras[k].append(try timeCommand(path, ["-z", "0", "-p", "cli.x"], environment: env))
        }
    }
    func median(_ v: [Double]) -> Double { let s = v.sorted(); return s[s.count / 2] }
    var rows = [
        Metric(label: "dbus-send --type=signal, median of \(runs)", value: median(theirs), unit: "ms", reference: nil, goal: .none),
        Metric(label: "notifyutil -z 0 -p (as packaged), median of \(runs)", value: median(ours), unit: "ms", reference: median(theirs), goal: .atMost(1.0)),
    ]
    for (k, path) in options.cliExtras.enumerated() {
        rows.append(Metric(label: "\((path as NSString).lastPathComponent), median of \(runs)", value: median(extras[k]), unit: "ms",
                           reference: median(theirs), goal: .none))
    }
    return rows
}

/// `throughput`: one poster floods one observer in another process, as fast as it can; the
/// observer counts what arrived (and gaps in the numbering). Ours against the floor, alternating:
/// the fast path on (the default: each post also on the bus), off (the bus path), and direct only.
/// Each run also counts the CPU it cost: the poster's, the observer's (until the bus copies of
/// posts it had directly were dropped too) and the dbus-daemon's (user + sys).
func throughputSuite(_ options: Options) throws -> [Metric] {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let env = ["DARWIN_NOTIFY_BUS": bus.address]
    let count = max(50_000, options.samples * 10) // past start-up: 20,000 measured lower, 50,000 and 200,000 alike
    struct Run { var received = 0.0, gaps = 0.0, seconds = 0.0, posted = 0.0, cpuMicros = 0.0 }
    func fields(_ line: String) -> [String: Double] {
        var out: [String: Double] = [:]
        for part in line.split(separator: " ") {
            let kv = part.split(separator: "=")
            if kv.count == 2 { out[String(kv[0])] = Double(kv[1]) }
        }
        return out
    }
    func once(sink: [String], flood: [String], tool: String, fastPath: String? = nil) throws -> Run {
        let extra = fastPath.map { ["DARWIN_NOTIFY_FAST_PATH": $0] } ?? [:]
        // The bus path: both ends with the fast path off. Direct only: the poster's choice.
        let receiver = try Child(tool, sink, environment: env.merging(fastPath == "0" ? extra : [:]) { $1 })
        defer { receiver.stop() }
        _ = try receiver.readLine { $0 == "ready" }
        let daemonBefore = cpuMicros(bus.pid)
        let posted = fields(try Child(tool, flood, environment: env.merging(extra) { $1 }).readToEnd()
            .split(separator: "\n").last.map(String.init) ?? "")
        let got = fields(try receiver.readLine { $0.hasPrefix("received=") })
        _ = try receiver.readToEnd() // exited: the daemon has sent it all
        let daemon = cpuMicros(bus.pid) - daemonBefore
        return Run(received: got["received"] ?? 0, gaps: got["gaps"] ?? 0, seconds: (got["elapsed_ns"] ?? 0) / 1e9,
                   posted: Double(count), cpuMicros: (posted["cpu_us"] ?? .nan) + (got["cpu_us"] ?? .nan) + daemon)
    }
    func add(_ a: inout Run, _ b: Run) {
        a.received += b.received; a.gaps += b.gaps; a.seconds += b.seconds; a.posted += b.posted; a.cpuMicros += b.cpuMicros
    }
    var floor = Run(), ours = Run(), busOnly = Run(), direct = Run()
    for round in 0..<options.rounds {
        let name = "throughput.r\(round)"
        add(&floor, try once(sink: ["sink", name], flood: ["flood", name, "\(count)"], tool: "dbus-floor"))
        add(&ours, try once(sink: ["bench-sink", name], flood: ["bench-flood", name, "\(count)"], tool: "cnotify-probe"))
        add(&busOnly, try once(sink: ["bench-sink", name], flood: ["bench-flood", name, "\(count)"], tool: "cnotify-probe", fastPath: "0"))
        // The fast path's opt-in: no bus copy of a post every connected observer took directly.
        add(&direct, try once(sink: ["bench-sink", name], flood: ["bench-flood", name, "\(count)"], tool: "cnotify-probe", fastPath: "direct"))
    }
    func note(_ r: Run) -> String {
        let lost = Int(r.posted - r.received)
        return lost == 0 ? "delivered = posted (\(Int(r.posted)))"
            : "lost \(lost) of \(Int(r.posted)) (\(Int(r.gaps)) seen as gaps): dbus-daemon drops broadcasts to a receiver whose queue is full"
    }
    func rate(_ r: Run) -> Double { r.received / max(r.seconds, 1e-9) / 1000 }
    func perPost(_ r: Run) -> Double { r.cpuMicros / max(r.posted, 1) }
    return [
        Metric(label: "floor: 1 poster → 1 observer", value: rate(floor), unit: "k msg/s", reference: nil, goal: .none, note: note(floor)),
        Metric(label: "C center: 1 poster → 1 observer", value: rate(ours), unit: "k msg/s", reference: rate(floor),
               goal: .atLeast(4.0), note: note(ours)),
        Metric(label: "C center, fast path off (the bus path)", value: rate(busOnly), unit: "k msg/s", reference: rate(floor),
               goal: .none, note: note(busOnly)),
        Metric(label: "C center, bus copy skipped (direct only)", value: rate(direct), unit: "k msg/s",
               reference: rate(floor), goal: .atLeast(3.0), note: note(direct)),
        Metric(label: "CPU/post, floor (3 processes)", value: perPost(floor), unit: "µs", reference: nil, goal: .none),
        Metric(label: "CPU/post, the bus path (3 processes)", value: perPost(busOnly), unit: "µs", reference: nil, goal: .none),
        Metric(label: "CPU/post, fast path (default)", value: perPost(ours), unit: "µs",
               reference: perPost(busOnly), goal: .atMost(0.40), note: "bus copies held and coalesced per name (one per 10 ms)"),
        Metric(label: "CPU/post, fast path, direct only", value: perPost(direct), unit: "µs",
               reference: perPost(busOnly), goal: .atMost(0.6)),
    ]
}

/// `fanout`: one poster, 100 observer processes; per post, the time until the last observer has
/// it (CLOCK_MONOTONIC is shared by all processes). Ours against the floor, in the same run, and
/// a plain Unix socket per process beside them, bare and reporting each arrival as the others do.
func fanoutSuite(_ options: Options) throws -> [Metric] {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let env = ["DARWIN_NOTIFY_BUS": bus.address]
    let observers = 100, posts = max(20, min(options.samples / 100, 100))
    /// The CPU time of every thread of `children` so far, ns (/proc/PID/task/*/schedstat).
    func cpuNanoseconds(_ children: [Child]) -> UInt64 {
        children.reduce(0) { sum, child in
            let tasks = "/proc/\(child.process.processIdentifier)/task"
            let ids = (try? FileManager.default.contentsOfDirectory(atPath: tasks)) ?? []
            return sum + ids.reduce(0) { total, id in
                let text = (try? String(contentsOfFile: "\(tasks)/\(id)/schedstat", encoding: .utf8)) ?? ""
                return total + (text.split(separator: " ").first.flatMap { UInt64($0) } ?? 0)
            }
        }
    }
    /// µs until the last observer had each post, and the observers' CPU per post each (µs).
    func run(tool: String, stamp: [String], poster: [String]) throws -> (arrivals: [Double], cpu: Double) {
        let children = try (0..<observers).map { _ in try Child(tool, stamp, environment: env) }
        defer { children.forEach { $0.kill() } } // idle observers: no need to wait for them
        for child in children { _ = try child.readLine { $0 == "ready" } }
        let cpuBefore = cpuNanoseconds(children)
        let postTimes = try Child(tool, poster, environment: env).readToEnd()
            .split(separator: "\n").compactMap { UInt64($0) }
        let cpu = Double(cpuNanoseconds(children) &- cpuBefore) / 1000 / Double(observers * posts)
        guard postTimes.count == posts else { throw BenchError("poster made \(postTimes.count) of \(posts) posts") }
        var last = [UInt64](repeating: 0, count: posts)
        for child in children {
            for k in 0..<posts {
                let line = try child.readLine { UInt64($0) != nil }
                last[k] = max(last[k], UInt64(line)!)
            }
        }
        return (zip(last, postTimes).map { Double($0 &- $1) / 1000 }, cpu) // µs until the last observer
    }
    let name = "fanout.x"
    // Alternating rounds, so that a slow spell of this machine falls on both alike.
    /// The same fan-out with no bus and no code of ours: a process blocked in `recv` per observer
    /// (dbus-floor bare-fanout), what the target is measured against besides the floor.
    /// `write`: each process also writes each arrival to a pipe as a line, as the observers of
    /// the floor and of ours do; `loop`: and waits and reads in an event loop's shape, a poll over
    /// four descriptors and a recvmmsg (dbus-floor's usage). What is left is the library.
    /// `broadcast`: the same shape, woken by one write to an eventfd every process's epoll set
    /// holds instead of a frame to each: what the poster's share would be with one wake-up for all.
    /// `doorbell`: the frames of `loop` still sent each to its own socket, which wakes nobody, then
    /// that one write: one wake-up for all with the data path of today (measured: no faster than `loop`).
    func bare(_ variant: String? = nil) throws -> [Double] {
        let lines = try Child("dbus-floor", ["bare-fanout", "\(observers)", "\(posts)", "50"] + (variant.map { [$0] } ?? []),
                              environment: env).readToEnd()
            .split(separator: "\n")
        guard lines.count == posts, lines.allSatisfy({ UInt64($0) != nil }) else {
            throw BenchError("bare-fanout: \(lines.count) of \(posts) posts reached every process")
        }
        return lines.map { Double(UInt64($0)!) / 1000 }
    }
    var floor: [Double] = [], ours: [Double] = [], socket: [Double] = [], ratios: [Double] = [], socketRatios: [Double] = []
    var written: [Double] = [], writtenRatios: [Double] = [], looped: [Double] = [], loopedRatios: [Double] = []
    var broadcast: [Double] = [], broadcastRatios: [Double] = [], doorbell: [Double] = [], doorbellRatios: [Double] = []
    var floorCPU: [Double] = [], oursCPU: [Double] = []
    func median(_ v: [Double]) -> Double { let s = v.sorted(); return s[s.count / 2] }
    func spread(_ v: [Double]) -> String { v.map { String(format: "%.2f", $0) }.joined(separator: ", ") }
    for _ in 0..<options.rounds {
        let f = try run(tool: "dbus-floor", stamp: ["stamp", name], poster: ["fanout-post", name, "\(posts)", "50"])
        let o = try run(tool: "cnotify-probe", stamp: ["bench-stamp", name], poster: ["bench-fanout-post", name, "\(posts)", "50"])
        let s = try bare()
        let w = try bare("write")
        let l = try bare("loop")
        let b = try bare("broadcast")
        let d = try bare("doorbell")
        floor += f.arrivals
        ours += o.arrivals
        floorCPU.append(f.cpu)
        oursCPU.append(o.cpu)
        socket += s
        written += w
        looped += l
        broadcast += b
        doorbell += d
        ratios.append(median(o.arrivals) / median(f.arrivals))
        socketRatios.append(median(s) / median(f.arrivals))
        writtenRatios.append(median(w) / median(f.arrivals))
        loopedRatios.append(median(l) / median(f.arrivals))
        broadcastRatios.append(median(b) / median(f.arrivals))
        doorbellRatios.append(median(d) / median(f.arrivals))
    }
    return [
        Metric(label: "floor: 1 → 100 processes, median of \(floor.count)", value: median(floor), unit: "µs", reference: nil, goal: .none),
        Metric(label: "C center: 1 → 100 processes, median of \(ours.count)", value: median(ours), unit: "µs", reference: median(floor),
               goal: .atMost(0.50), note: "rounds: \(spread(ratios))"),
        // CPU varies less than the time to the last observer: what an A/B of two builds reads.
        Metric(label: "C center: observers' CPU per post each, vs the floor's", value: median(oursCPU), unit: "µs",
               reference: median(floorCPU), goal: .none,
               note: "rounds: \(oursCPU.map { String(format: "%.1f", $0) }.joined(separator: ", ")) µs; the floor's \(floorCPU.map { String(format: "%.1f", $0) }.joined(separator: ", ")) µs"),
        Metric(label: "plain socket 1 → 100, median of \(socket.count)", value: median(socket), unit: "µs",
               reference: median(floor), goal: .none, note: "rounds: \(spread(socketRatios))"),
        Metric(label: "plain socket, each arrival written as above, median of \(written.count)", value: median(written), unit: "µs",
               reference: median(floor), goal: .none, note: "rounds: \(spread(writtenRatios)); a line to a pipe per arrival, as the two above"),
        Metric(label: "plain socket, written, in an event loop's shape, median of \(looped.count)", value: median(looped), unit: "µs",
               reference: median(floor), goal: .none, note: "rounds: \(spread(loopedRatios)); poll over 4 descriptors, recvmmsg: no library code"),
        Metric(label: "the same, one wake-up for all (an eventfd in each epoll set), median of \(broadcast.count)", value: median(broadcast), unit: "µs",
               reference: median(floor), goal: .none, note: "rounds: \(spread(broadcastRatios)); one write by the poster instead of a frame to each: no library code"),
        Metric(label: "the same woken so, each frame still on its own socket (a doorbell), median of \(doorbell.count)", value: median(doorbell), unit: "µs",
               reference: median(floor), goal: .none, note: "rounds: \(spread(doorbellRatios)); a frame to each, which wakes nobody, then the one write: no library code"),
    ]
}

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
        Metric(label: "C observer of 1,000 names (cc build), idle", value: ours, unit: "MiB", reference: theirs, goal: .atMost(1.5)),
        Metric(label: "same, SwiftPM-built (loads Swift runtime)", value: swiftBuilt, unit: "MiB", reference: theirs, goal: .none),
    ]
}

/// `cli`: wall time of `notifyutil -p` against `dbus-send --type=signal` for the same post,
/// alternating, median of the runs (posix_spawn + waitpid, so the spawner adds little).
func cliSuite(_ options: Options) throws -> [Metric] {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let runs = max(20, min(options.samples / 30, 300))
    let env = ["DARWIN_NOTIFY_BUS": bus.address]
    let notifyutil = Child.siblings + "/notifyutil"
    var ours: [Double] = [], theirs: [Double] = []
    for _ in 0..<runs {
        ours.append(try timeCommand(notifyutil, ["-p", "cli.x"], environment: env))
        theirs.append(try timeCommand("/usr/bin/dbus-send", ["--bus=\(bus.address)", "--type=signal", "/org/darwinnotify",
                                                            "org.darwinnotify.Notify.Post", "string:cli.x"], environment: [:]))
    }
    func median(_ v: [Double]) -> Double { let s = v.sorted(); return s[s.count / 2] }
    return [
        Metric(label: "dbus-send --type=signal, median of \(runs)", value: median(theirs), unit: "ms", reference: nil, goal: .none),
        Metric(label: "notifyutil -p, median of \(runs)", value: median(ours), unit: "ms", reference: median(theirs), goal: .atMost(1.0)),
    ]
}

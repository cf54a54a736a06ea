// PeersSuite: `notify-bench peers`, the same workloads through what a Linux user would pick instead
// of this project (ZeroMQ, Redis, NATS, MQTT, sd-bus, a plain Unix socket), with this project
// and the raw-libdbus floor, in one run, interleaved, so every ratio is read against the same
// machine state. Each system is driven by peers/peers.c with its own C client library; the
// servers (dbus-daemon, redis-server, nats-server, mosquitto) are started here and stopped by pid.
import DarwinNotify
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One system of the comparison.
struct PeerSystem {
    let id: String          // peers.c's SYSTEM
    let label: String
    let address: String
    let serverPID: Int32?   // whose CPU counts too
    /// A publisher that listens and waits for its subscribers (zmq's XPUB, our Unix socket).
    var publisherWaits: Bool { id == "zmq" || id == "uds" }
}

/// What one round measured of one system.
struct PeerRound {
    var latency = Samples()
    var throughput = 0.0        // msg/s, first → last arrival at the subscriber
    var lost = 0
    var fanoutMicros = 0.0      // median over the stamps of (last subscriber's arrival − send)
    var fanoutLost = 0
    var cpuPer100k = 0.0        // ms of user+sys, publisher + subscriber + server
    var idleKilobytes = 0.0     // median resident set of the idle fan-out subscribers
}

/// The servers of a run.
final class PeerServers {
    let bus: PrivateBus
    let broker: BenchBroker
    let redis: Process
    let nats: Process
    let directory: String
    let natsPort: Int

    init() throws {
        directory = NSTemporaryDirectory() + "notify-bench-peers-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        bus = try PrivateBus()
        broker = try BenchBroker()
        // Redis on a Unix socket (faster than TCP on one host), nothing saved.
        redis = try PeerServers.launch("/usr/bin/redis-server", ["--port", "0", "--unixsocket", directory + "/redis.sock",
                                                                 "--save", "", "--appendonly", "no"])
        natsPort = Int.random(in: 20_000 ... 60_000)
        nats = try PeerServers.launch(["/usr/sbin/nats-server", "/usr/bin/nats-server"].first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/sbin/nats-server",
                                      ["-a", "127.0.0.1", "-p", "\(natsPort)"])
        let deadline = Date().addingTimeInterval(10)
        while !(FileManager.default.fileExists(atPath: directory + "/redis.sock") && BenchBroker.listening(natsPort)) {
            guard Date() < deadline, redis.isRunning, nats.isRunning else {
                stop()
                throw BenchError("redis-server or nats-server did not start (apt-get install redis-server nats-server)")
            }
            usleep(10_000)
        }
    }

    private static func launch(_ path: String, _ arguments: [String]) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }

    func systems() -> [PeerSystem] {
        [
            PeerSystem(id: "libdbus", label: "raw libdbus signal (floor)", address: bus.address, serverPID: bus.pid),
            PeerSystem(id: "darwin", label: "DarwinNotify, C callback", address: bus.address, serverPID: bus.pid),
            PeerSystem(id: "swift", label: "DarwinNotify, Swift closure", address: bus.address, serverPID: bus.pid),
            PeerSystem(id: "sdbus", label: "sd-bus signal (libsystemd)", address: bus.address, serverPID: bus.pid),
            PeerSystem(id: "zmq", label: "ZeroMQ PUB/SUB, ipc://", address: directory + "/zmq", serverPID: nil),
            PeerSystem(id: "redis", label: "Redis pub/sub, Unix socket", address: directory + "/redis.sock", serverPID: redis.processIdentifier),
            PeerSystem(id: "nats", label: "NATS, 127.0.0.1", address: "127.0.0.1:\(natsPort)", serverPID: nats.processIdentifier),
            PeerSystem(id: "mqtt", label: "MQTT (mosquitto), QoS 0", address: "127.0.0.1:\(broker.port)", serverPID: broker.pid),
            PeerSystem(id: "uds", label: "plain Unix socket (own framing)", address: directory + "/uds.sock", serverPID: nil),
        ]
    }

    func stop() {
        for process in [redis, nats] where process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        broker.stop()
        bus.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// A peers.c process: lines with a timeout, stopped by closing stdin.
final class PeerProcess {
    let process = Process()
    private let input = Pipe()
    let reader: LineReader

    init(_ binary: String, _ system: PeerSystem, _ arguments: [String], environment: [String: String]) throws {
        let output = Pipe()
        // The Swift closure's subscriber is notify-bench itself (SwiftPeer); everything else is peers.c.
        if system.id == "swift", arguments.first == "sub" {
            process.executableURL = URL(fileURLWithPath: Child.siblings + "/notify-bench")
            process.arguments = ["_peer-sub", system.address] + arguments.dropFirst()
        } else {
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = [system.id == "swift" ? "darwin" : system.id, system.address] + arguments
        }
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = output
        process.standardInput = input
        try process.run()
        reader = LineReader(output.fileHandleForReading)
    }

    func line(_ prefix: String, timeout: TimeInterval = 30) throws -> String {
        while let line = reader.line(timeout: timeout) { if line.hasPrefix(prefix) { return line } }
        throw BenchError("\(process.arguments?.prefix(3).joined(separator: " ") ?? "peers") printed no '\(prefix)' line within \(Int(timeout)) s")
    }

    /// Closes its stdin: the process ends within its next look at stdin (every 100 ms).
    func closeInput() { try? input.fileHandleForWriting.close() }

    func stop() {
        closeInput()
        for _ in 0 ..< 200 where process.isRunning { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

/// user+sys time of a running process so far (µs), from /proc.
func cpuMicros(_ pid: Int32) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return 0 }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let utime = Double(fields[11]), let stime = Double(fields[12]) else { return 0 }
    return (utime + stime) * 1_000_000 / Double(sysconf(Int32(_SC_CLK_TCK)))
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
}

enum PeersBench {
    static let fanoutSubscribers = 100

    static func latency(_ binary: String, _ system: PeerSystem, samples: Int, warmup: Int, env: [String: String]) throws -> Samples {
        let echo = try PeerProcess(binary, system, ["echo"], environment: env)
        defer { echo.stop() }
        // A listening publisher (our Unix socket) must be there before the echo can subscribe.
        if !system.publisherWaits { _ = try echo.line("ready") }
        let pinger = try PeerProcess(binary, system, ["ping", "\(samples)", "\(warmup)"], environment: env)
        defer { pinger.stop() }
        if system.publisherWaits { _ = try echo.line("ready") }
        var result = Samples()
        for _ in 0 ..< samples {
            let line = try pinger.line("rtt ")
            guard let rtt = UInt64(line.dropFirst(4)) else { throw BenchError("bad line from peers ping: \(line)") }
            result.record(rtt / 2)
        }
        return result
    }

    static func throughput(_ binary: String, _ system: PeerSystem, messages: Int, env: [String: String], into round: inout PeerRound) throws {
        var publisher: PeerProcess?
        if system.publisherWaits { publisher = try PeerProcess(binary, system, ["pub", "\(messages)", "1"], environment: env) }
        let subscriber = try PeerProcess(binary, system, ["sub", "\(messages)"], environment: env)
        defer { subscriber.stop(); publisher?.stop() }
        _ = try subscriber.line("ready")
        let server0 = system.serverPID.map(cpuMicros) ?? 0
        if publisher == nil { publisher = try PeerProcess(binary, system, ["pub", "\(messages)"], environment: env) }
        let sent = try publisher!.line("sent ", timeout: 120)
        let received = try subscriber.line("received ", timeout: 120)
        let server = (system.serverPID.map(cpuMicros) ?? 0) - server0
        let r = received.split(separator: " ")
        guard r.count >= 5, let count = Int(r[1]), let first = Double(r[2]), let last = Double(r[3]),
              let subCPU = Double(r[4].dropFirst("cpu_us=".count)),
              let pubCPU = Double(sent.split(separator: " ").last?.dropFirst("cpu_us=".count) ?? "") else {
            throw BenchError("bad lines from peers: \(sent) / \(received)")
        }
        round.throughput = last > first ? Double(count) / ((last - first) / 1e9) : 0
        round.lost = messages - count
        round.cpuPer100k = (pubCPU + subCPU + server) / Double(messages) * 100_000 / 1000
    }

    static func fanout(_ binary: String, _ system: PeerSystem, stamps: Int, env: [String: String], into round: inout PeerRound) throws {
        var stamper: PeerProcess?
        if system.publisherWaits {
            stamper = try PeerProcess(binary, system, ["stamp", "\(stamps)", "100", "\(fanoutSubscribers)"], environment: env)
        }
        var subscribers: [PeerProcess] = []
        // All told at once, then each waited for: one by one, the 100 took 10 s (each looks at
        // its stdin every 100 ms).
        defer { subscribers.forEach { $0.closeInput() }; subscribers.forEach { $0.stop() }; stamper?.stop() }
        for _ in 0 ..< fanoutSubscribers { subscribers.append(try PeerProcess(binary, system, ["sub"], environment: env)) }
        for subscriber in subscribers { _ = try subscriber.line("ready") }
        round.idleKilobytes = median(subscribers.compactMap { try? residentKilobytes($0.process.processIdentifier) })
        if stamper == nil { stamper = try PeerProcess(binary, system, ["stamp", "\(stamps)", "100", "0"], environment: env) }
        var spans: [Double] = []
        var lost = 0
        for _ in 0 ..< stamps {
            guard let sent = Double(try stamper!.line("sent ").dropFirst(5)) else { throw BenchError("bad stamp line") }
            var last = sent
            for subscriber in subscribers {
                // A subscriber that never has it within 5 s lost it (reported, not waited for).
                if let got = subscriber.reader.line(timeout: 5).flatMap({ Double($0.dropFirst(4)) }) { last = max(last, got) } else { lost += 1 }
            }
            spans.append((last - sent) / 1000)
        }
        round.fanoutMicros = median(spans)
        round.fanoutLost = lost
    }
}

/// `peers`: every system through the same roles, `options.rounds` rounds, systems interleaved
/// (their order rotated each round), then one table of medians with each round's spread.
func peersSuite(_ options: Options) async throws -> [[String]] {
    let binary = try PlainC.buildPeers()
    let servers = try PeerServers()
    defer { servers.stop() }
    let systems = servers.systems()
    let env = ["DARWIN_NOTIFY_STATE_DIR": servers.directory + "/state"]
    let samples = max(20, options.samples / options.rounds)
    let messages = max(200, options.samples * 10)
    let stamps = options.samples >= 1000 ? 9 : 3
    var rounds: [String: [PeerRound]] = [:]
    for r in 0 ..< options.rounds {
        for k in 0 ..< systems.count {
            let system = systems[(k + r) % systems.count]
            var round = PeerRound()
            if system.id == "swift" { // its own ping-pong (the latency suite's harness: closures on both sides)
                round.latency = try await PingPong.measure(.swiftClosure, bus: servers.bus.address, samples: samples, warmup: options.warmup)
            } else {
                round.latency = try PeersBench.latency(binary, system, samples: samples, warmup: options.warmup, env: env)
            }
            try PeersBench.throughput(binary, system, messages: messages, env: env, into: &round)
            try PeersBench.fanout(binary, system, stamps: stamps, env: env, into: &round)
            rounds[system.id, default: []].append(round)
        }
    }
    return peersTable(systems: systems, rounds: rounds, messages: messages)
}

/// The table: one row per system, medians of the rounds, each with its ratio to this project's C
/// callback row and its spread ((max − min) / median across rounds; ⚠ past 20%).
func peersTable(systems: [PeerSystem], rounds: [String: [PeerRound]], messages: Int) -> [[String]] {
    let ours = rounds["darwin"] ?? []
    func stat(_ values: [Double]) -> (median: Double, spread: Double) {
        let m = median(values)
        return (m, m > 0 ? ((values.max() ?? 0) - (values.min() ?? 0)) / m : 0)
    }
    func cell(_ values: [Double], _ ref: [Double], format: String) -> String {
        let (m, spread) = stat(values)
        let r = median(ref)
        var text = String(format: format, m)
        if r > 0 { text += String(format: " (%.2f×)", m / r) }
        text += String(format: " ±%.0f%%", spread * 100)
        if spread > 0.2 { text += " ⚠" }
        return text
    }
    var table: [[String]] = [["system", "p50 µs", "p99 µs", "throughput msg/s (lost of \(messages))", "fan-out 1→100 µs (lost)",
                              "CPU ms / 100k msgs", "idle subscriber RSS kB"]]
    for system in systems {
        guard let rs = rounds[system.id], !rs.isEmpty else { continue }
        let lost = rs.map(\.lost).reduce(0, +), fanoutLost = rs.map(\.fanoutLost).reduce(0, +)
        table.append([
            system.label,
            cell(rs.map(\.latency.p50), ours.map(\.latency.p50), format: "%.1f"),
            cell(rs.map(\.latency.p99), ours.map(\.latency.p99), format: "%.1f"),
            cell(rs.map(\.throughput), ours.map(\.throughput), format: "%.0f") + " lost \(lost)",
            cell(rs.map(\.fanoutMicros), ours.map(\.fanoutMicros), format: "%.0f") + " lost \(fanoutLost)",
            cell(rs.map(\.cpuPer100k), ours.map(\.cpuPer100k), format: "%.0f"),
            cell(rs.map(\.idleKilobytes), ours.map(\.idleKilobytes), format: "%.0f"),
        ])
    }
    return table
}

func printPeers(_ table: [[String]], rounds: Int) {
    print("peers: the same workloads through each system, \(rounds) interleaved rounds; median (ratio to DarwinNotify's C callback) ±spread across rounds, ⚠ when the rounds disagree by more than 20%")
    let widths = table[0].indices.map { i in table.map { $0[i].count }.max() ?? 0 }
    for row in table {
        print(row.enumerated().map { i, cell in cell + String(repeating: " ", count: max(0, widths[i] - cell.count)) }.joined(separator: "  "))
    }
    print()
}

func json(suite: String, table: [[String]]) -> String {
    let header = table[0]
    let rows = table.dropFirst().map { row in
        "{" + zip(header, row).map { "\"\($0.0)\":\"\($0.1)\"" }.joined(separator: ",") + "}"
    }
    return "{\"suite\":\"\(suite)\",\"rows\":[" + rows.joined(separator: ",") + "]}"
}

/// The Swift closure as a peers.c `sub` (`notify-bench _peer-sub ADDRESS [N]`): observes "bench"
/// with `observe(_:queue:)` on a serial queue (the closure API's default shape) and prints what
/// peers.c's subscriber prints, so the Swift row is measured by the same harness, against the C
/// publisher. The arrival time is taken inside the closure.
enum SwiftPeer {
    static func runSubscriber(address: String, count: Int?) throws -> Never {
        let center = try NotifyCenter(bus: address)
        let state = Mutex<(received: Int, first: UInt64, last: UInt64)>((0, 0, 0))
        let done = DispatchSemaphore(value: 0)
        let cpu0 = cpuMicros(getpid())
        let observation = try center.observe("bench", queue: DispatchQueue(label: "bench.sub")) { _ in
            let now = monotonicNanoseconds() // the clock peers.c stamps with
            let received = state.withLock { s -> Int in
                if s.received == 0 { s.first = now }
                s.received += 1
                s.last = now
                return s.received
            }
            if let count { if received == count { done.signal() } }
            else { FileHandle.standardOutput.write(Data("got \(now)\n".utf8)) }
        }
        FileHandle.standardOutput.write(Data("ready\n".utf8))
        if count != nil {
            // Until all arrived, or 2 s with nothing new after the first (the rest was lost).
            var seen = -1
            while done.wait(timeout: .now() + 2) == .timedOut {
                let now = state.withLock { $0.received }
                if now == seen && now > 0 { break }
                seen = now
            }
            let s = state.withLock { $0 }
            FileHandle.standardOutput.write(Data("received \(s.received) \(s.first) \(s.last) cpu_us=\(Int(cpuMicros(getpid()) - cpu0))\n".utf8))
        }
        while readLine() != nil {}
        observation.cancel()
        exit(0)
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the clock every peers.c process stamps with.
func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

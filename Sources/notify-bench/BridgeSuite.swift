// The `bridge` suite: post on bus A → callback on bus B through two notify-bridges, against
// mosquitto_pub → mosquitto_sub moving the same messages through the same broker in the same run
// (the broker alone: what the bridge adds is the difference). Twice: through one mosquitto, and
// through a 3-node NATS cluster with MQTT and JetStream (A's bridge and mosquitto_pub on node 0,
// B's bridge and mosquitto_sub on node 1), when nats-server is installed. The variants alternate
// in rounds (ours first in even rounds, the tools' in odd ones); the note gives the per-round
// ratios, so the spread shows.
import DarwinNotify
import Dispatch
import Foundation
import Synchronization

func bridgeSuite(_ options: Options) throws -> [Metric] {
    var metrics: [Metric] = []
    do {
        let broker = try BenchBroker()
        defer { broker.stop() }
        metrics += try bridgeRows(options, through: broker, label: "mosquitto")
    }
    if BenchNatsCluster.available {
        let cluster = try BenchNatsCluster()
        defer { cluster.stop() }
        metrics += try bridgeRows(options, through: cluster, label: "NATS cluster")
    } else {
        FileHandle.standardError.write(Data("bridge: nats-server is not installed; the cluster rows are skipped\n".utf8))
    }
    return metrics
}

/// Where the messages go in and come out: one broker, or two nodes of a cluster.
protocol BenchMQTT: AnyObject {
    /// The exporting side's broker (A's bridge, mosquitto_pub).
    var publishPort: Int { get }
    /// The importing side's broker (B's bridge, mosquitto_sub).
    var subscribePort: Int { get }
}

private func bridgeRows(_ options: Options, through broker: BenchMQTT, label: String) throws -> [Metric] {
    let busA = try PrivateBus(), busB = try PrivateBus()
    defer { busA.stop(); busB.stop() }
    let tag = "\(getpid())-\(broker.publishPort)"
    let bridgeA = try Child("notify-bridge", ["--bus", busA.address, "--broker", "mqtt://127.0.0.1:\(broker.publishPort)", "--export", "bench",
                                              "--client-id", "bench-a-\(tag)"], quiet: true)
    let bridgeB = try Child("notify-bridge", ["--bus", busB.address, "--broker", "mqtt://127.0.0.1:\(broker.subscribePort)", "--import", "bench",
                                              "--client-id", "bench-b-\(tag)"], quiet: true)
    defer { bridgeA.kill(); bridgeB.kill() }

    let centerA = try NotifyCenter(bus: busA.address), centerB = try NotifyCenter(bus: busB.address)
    let arrived = DispatchSemaphore(value: 0)
    let count = Atomic<Int>(0)
    let observation = try centerB.observe(namespace: "bench", queue: nil) { _ in
        count.add(1, ordering: .relaxed)
        arrived.signal()
    }
    defer { observation.cancel() }
    // Ready once a post crosses (both bridges connected, B subscribed).
    let deadline = Date().addingTimeInterval(60)
    repeat {
        guard Date() < deadline else { throw BenchError("no post crossed the bridges within 60 s (\(label))") }
        try centerA.post("bench.ready")
    } while arrived.wait(timeout: .now() + .milliseconds(200)) == .timedOut
    Thread.sleep(forTimeInterval: 0.5) // drain the extra readiness posts
    while arrived.wait(timeout: .now()) == .success {}

    let tools = try ToolPair(broker)
    defer { tools.stop() }
    let rounds = max(2, options.rounds)
    let perRound = max(20, min(options.samples, 3000) / rounds)
    let burst = options.samples >= 1000 ? 20_000 : options.samples >= 100 ? 2_000 : 200 // CI's smoke run (--samples 20) only checks that it runs
    var ours: [[Double]] = [], theirs: [[Double]] = [], ourRates: [Double] = [], theirRates: [Double] = []
    func ourLatency() throws -> [Double] {
        var values: [Double] = []
        for _ in 0 ..< perRound {
            let start = DispatchTime.now().uptimeNanoseconds
            try centerA.post("bench.latency")
            guard arrived.wait(timeout: .now() + .seconds(10)) == .success else { throw BenchError("a post was lost in the latency run (\(label))") }
            values.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1000)
        }
        return values
    }
    func ourThroughput() throws -> Double {
        count.store(0, ordering: .relaxed)
        let started = DispatchTime.now().uptimeNanoseconds
        for _ in 0 ..< burst { try centerA.post("bench.burst") }
        let until = Date().addingTimeInterval(60)
        while count.load(ordering: .relaxed) < burst, Date() < until { usleep(500) }
        guard count.load(ordering: .relaxed) >= burst else { throw BenchError("only \(count.load(ordering: .relaxed)) of \(burst) burst posts crossed (\(label))") }
        let rate = Double(burst) / (Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9)
        while arrived.wait(timeout: .now()) == .success {} // the burst's signals
        return rate
    }
    for round in 0 ..< rounds {
        if round % 2 == 0 {
            ours.append(try ourLatency()); theirs.append(try tools.latency(samples: perRound))
            ourRates.append(try ourThroughput()); theirRates.append(try tools.throughput(messages: burst))
        } else {
            theirs.append(try tools.latency(samples: perRound)); ours.append(try ourLatency())
            theirRates.append(try tools.throughput(messages: burst)); ourRates.append(try ourThroughput())
        }
    }

    func percentile(_ values: [Double], _ p: Double) -> Double {
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p / 100))]
    }
    func spread(_ ratios: [Double]) -> String {
        "rounds " + ratios.map { String(format: "%.2f", $0) }.joined(separator: " / ") + "×"
    }
    let pooledOurs = ours.flatMap { $0 }, pooledTheirs = theirs.flatMap { $0 }
    let p50s = zip(ours, theirs).map { percentile($0, 50) / percentile($1, 50) }
    let p99s = zip(ours, theirs).map { percentile($0, 99) / percentile($1, 99) }
    let rates = zip(ourRates, theirRates).map { $0 / $1 }
    let ourRate = ourRates.sorted()[ourRates.count / 2], theirRate = theirRates.sorted()[theirRates.count / 2]
    var p50 = Metric(label: "\(label): post A → callback B, p50", value: percentile(pooledOurs, 50), unit: "µs",
                     reference: percentile(pooledTheirs, 50), goal: .atMost(1.5))
    p50.note = spread(p50s)
    var p99 = Metric(label: "\(label): post A → callback B, p99", value: percentile(pooledOurs, 99), unit: "µs",
                     reference: percentile(pooledTheirs, 99), goal: .atMost(2))
    p99.note = spread(p99s)
    var rate = Metric(label: "\(label): posts A → callbacks B, \(burst)", value: ourRate, unit: "msg/s",
                      reference: theirRate, goal: .atLeast(1))
    rate.note = spread(rates)
    return [
        Metric(label: "\(label): mosquitto_pub → _sub, p50 (\(rounds)×\(perRound))", value: percentile(pooledTheirs, 50), unit: "µs", reference: nil, goal: .none),
        p50,
        Metric(label: "\(label): mosquitto_pub → _sub, p99", value: percentile(pooledTheirs, 99), unit: "µs", reference: nil, goal: .none),
        p99,
        Metric(label: "\(label): mosquitto_pub -l → _sub -C, \(burst)", value: theirRate, unit: "msg/s", reference: nil, goal: .none),
        rate,
    ]
}

/// The broker's own command-line clients (QoS 1 and a persistent session, as the bridges use): a publisher and a
/// subscriber kept running across the latency rounds, and a pair per throughput round.
final class ToolPair {
    private let broker: BenchMQTT
    private let sub: Process, pub: Process, pubIn: FileHandle, reader: LineReader

    init(_ broker: BenchMQTT) throws {
        self.broker = broker
        (sub, pubIn, pub, reader) = try Self.latencyPair(broker)
    }

    private static func latencyPair(_ broker: BenchMQTT) throws -> (Process, FileHandle, Process, LineReader) {
        let (sub, subOut) = try launchTool("mosquitto_sub", port: broker.subscribePort,
                                           ["-t", "ref/latency", "-q", "1"] + persistentSession("lat"), feed: false)
        let (pub, pubIn) = try launchTool("mosquitto_pub", port: broker.publishPort, ["-t", "ref/latency", "-q", "1", "-l"], feed: true)
        let reader = LineReader(subOut)
        // Until the subscription is in place, messages vanish: send until one comes back.
        let deadline = Date().addingTimeInterval(60)
        repeat {
            guard Date() < deadline else { throw BenchError("mosquitto_sub never got a message") }
            pubIn.write(Data("0\n".utf8))
        } while reader.line(timeout: 0.2) == nil
        while reader.line(timeout: 0.3) != nil {}
        return (sub, pubIn, pub, reader)
    }

    func stop() {
        sub.terminate(); sub.waitUntilExit()
        try? pubIn.close(); pub.waitUntilExit()
    }

    /// One message at a time: each payload is its send time; the reader subtracts it on arrival.
    func latency(samples: Int) throws -> [Double] {
        var values: [Double] = []
        for _ in 0 ..< samples {
            let start = DispatchTime.now().uptimeNanoseconds
            pubIn.write(Data("\(start)\n".utf8))
            guard let line = reader.line(timeout: 10), let sent = UInt64(line) else { throw BenchError("mosquitto_sub lost a message") }
            values.append(Double(DispatchTime.now().uptimeNanoseconds - sent) / 1000)
        }
        return values
    }

    /// `messages` lines into mosquitto_pub -l at once, until mosquitto_sub -C has them all.
    func throughput(messages: Int) throws -> Double {
        let topic = "ref/burst/\(UInt32.random(in: 0 ... .max))"
        let (sub, subOut) = try launchTool("mosquitto_sub", port: broker.subscribePort,
                                           ["-t", topic, "-q", "1", "-C", "\(messages + 1)"] + persistentSession("burst"), feed: false)
        let (pub, pubIn) = try launchTool("mosquitto_pub", port: broker.publishPort, ["-t", topic, "-q", "1", "-l"], feed: true)
        let reader = LineReader(subOut)
        repeat { pubIn.write(Data("ready\n".utf8)) } while reader.line(timeout: 0.2) == nil
        let started = DispatchTime.now().uptimeNanoseconds
        // Received messages beyond the first `ready` are counted up to -C.
        pubIn.write(Data(String(repeating: "x\n", count: messages).utf8))
        sub.waitUntilExit()
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        try? pubIn.close()
        pub.waitUntilExit()
        return Double(messages) / elapsed
    }
}

/// The subscriber keeps a persistent session, as an importing bridge does (clean session off, a
/// client id of its own): on a cluster that stores sessions (NATS's JetStream) each acknowledgement
/// is then a replicated write for the tools as for the bridge, so like is compared with like.
private func persistentSession(_ role: String) -> [String] {
    ["-c", "-i", "notify-bench-ref-\(role)-\(getpid())-\(UInt32.random(in: 0 ... .max))"]
}

/// Runs a mosquitto client against 127.0.0.1:`port`: its stdout, or its stdin when `feed`.
private func launchTool(_ name: String, port: Int, _ arguments: [String], feed: Bool) throws -> (Process, FileHandle) {
    let process = Process(), pipe = Pipe()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/" + name)
    process.arguments = ["-h", "127.0.0.1", "-p", "\(port)"] + arguments
    if feed { process.standardInput = pipe } else { process.standardOutput = pipe }
    try process.run()
    return (process, feed ? pipe.fileHandleForWriting : pipe.fileHandleForReading)
}

/// A 3-node NATS cluster for the suite (MQTT listeners, JetStream replicated to all three).
final class BenchNatsCluster: BenchMQTT {
    static let executable = ["/usr/sbin/nats-server", "/usr/bin/nats-server"].first { FileManager.default.isExecutableFile(atPath: $0) }
    static var available: Bool { executable != nil }
    private var processes: [Process] = []
    private let directory: String
    private let mqttPorts: [Int]
    var publishPort: Int { mqttPorts[0] }
    var subscribePort: Int { mqttPorts[1] }

    init() throws {
        directory = NSTemporaryDirectory() + "notify-bench-nats-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let base = Int.random(in: 20_000 ... 50_000)
        mqttPorts = (0 ..< 3).map { base + $0 }
        let routes = (0 ..< 3).map { "nats://127.0.0.1:\(base + 10 + $0)" }.joined(separator: ", ")
        for node in 0 ..< 3 {
            let config = directory + "/n\(node).conf"
            try """
            server_name: n\(node)
            listen: 127.0.0.1:\(base + 20 + node)
            jetstream { store_dir: "\(directory)/js\(node)" }
            cluster { name: bench, listen: 127.0.0.1:\(base + 10 + node), routes: [\(routes)] }
            mqtt { listen: 127.0.0.1:\(base + node) }
            """.write(toFile: config, atomically: true, encoding: .utf8)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: BenchNatsCluster.executable!)
            process.arguments = ["-c", config]
            process.standardError = FileHandle.nullDevice
            try process.run()
            processes.append(process)
        }
        let deadline = Date().addingTimeInterval(30)
        while !mqttPorts.allSatisfy(BenchBroker.listening) {
            guard Date() < deadline, processes.allSatisfy(\.isRunning) else { throw BenchError("the NATS cluster did not start") }
            usleep(20_000)
        }
    }

    func stop() {
        for process in processes where process.isRunning { kill(process.processIdentifier, SIGKILL) }
        for process in processes { process.waitUntilExit() }
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// A mosquitto for the suite on 127.0.0.1 and a free port, and the reference runs with its
/// own command-line clients (QoS 1, as the bridges use).
final class BenchBroker: BenchMQTT {
    let port: Int
    let url: String
    private let process = Process()
    private let directory: String

    init() throws {
        directory = NSTemporaryDirectory() + "notify-bench-broker-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        port = Int.random(in: 20_000 ... 60_000)
        url = "mqtt://127.0.0.1:\(port)"
        let config = directory + "/mosquitto.conf"
        try """
        listener \(port) 127.0.0.1
        allow_anonymous true
        max_queued_messages 200000
        max_inflight_messages 100
        \(getuid() == 0 ? "user root" : "")
        """.write(toFile: config, atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: ["/usr/sbin/mosquitto", "/usr/bin/mosquitto"].first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/sbin/mosquitto")
        process.arguments = ["-c", config]
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(10)
        while !BenchBroker.listening(port) {
            guard Date() < deadline, process.isRunning else { throw BenchError("mosquitto did not start on port \(port)") }
            usleep(10_000)
        }
    }

    var pid: Int32 { process.processIdentifier }
    var publishPort: Int { port }
    var subscribePort: Int { port }

    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }

    static func listening(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}

/// Lines from a pipe, with a timeout (a reader thread feeds a queue).
final class LineReader: @unchecked Sendable { // the buffer is guarded by `lock`; the thread only appends
    private let lock = NSCondition()
    private var lines: [String] = []
    private var partial = ""

    init(_ handle: FileHandle) {
        Thread { [self] in
            while true {
                let data = handle.availableData
                if data.isEmpty { return }
                lock.lock()
                partial += String(decoding: data, as: UTF8.self)
                while let nl = partial.firstIndex(of: "\n") {
                    lines.append(String(partial[..<nl]))
                    partial.removeSubrange(...nl)
                }
                lock.broadcast()
                lock.unlock()
            }
        }.start()
    }

    func line(timeout: TimeInterval) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        lock.lock()
        defer { lock.unlock() }
        while lines.isEmpty { if !lock.wait(until: deadline) { return nil } }
        return lines.removeFirst()
    }
}

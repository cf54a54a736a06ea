// The `bridge` suite: post on bus A → callback on bus B through two notify-bridges and one
// mosquitto on loopback, against mosquitto_pub → mosquitto_sub moving the same messages through
// the same broker in the same run (the broker alone: what the bridge adds is the difference).
import DarwinNotify
import Dispatch
import Foundation
import Synchronization

func bridgeSuite(_ options: Options) throws -> [Metric] {
    let broker = try BenchBroker()
    defer { broker.stop() }
    let busA = try PrivateBus(), busB = try PrivateBus()
    defer { busA.stop(); busB.stop() }
    let bridgeA = try Child("notify-bridge", ["--bus", busA.address, "--broker", broker.url, "--export", "bench", "--client-id", "bench-a"])
    let bridgeB = try Child("notify-bridge", ["--bus", busB.address, "--broker", broker.url, "--import", "bench", "--client-id", "bench-b"])
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
    let deadline = Date().addingTimeInterval(30)
    repeat {
        guard Date() < deadline else { throw BenchError("no post crossed the bridges within 30 s") }
        try centerA.post("bench.ready")
    } while arrived.wait(timeout: .now() + .milliseconds(200)) == .timedOut
    Thread.sleep(forTimeInterval: 0.5) // drain the extra readiness posts
    while arrived.wait(timeout: .now()) == .success {}

    let samples = min(options.samples, 2000)
    var ours: [Double] = []
    for _ in 0 ..< samples {
        let start = DispatchTime.now().uptimeNanoseconds
        try centerA.post("bench.latency")
        guard arrived.wait(timeout: .now() + .seconds(10)) == .success else { throw BenchError("a post was lost in the latency run") }
        ours.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1000)
    }
    let theirs = try broker.toolLatency(samples: samples)

    let burst = 20_000
    count.store(0, ordering: .relaxed)
    let started = DispatchTime.now().uptimeNanoseconds
    for _ in 0 ..< burst { try centerA.post("bench.burst") }
    let until = Date().addingTimeInterval(60)
    while count.load(ordering: .relaxed) < burst, Date() < until { usleep(1000) }
    guard count.load(ordering: .relaxed) >= burst else { throw BenchError("only \(count.load(ordering: .relaxed)) of \(burst) burst posts crossed") }
    let ourRate = Double(burst) / (Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9)
    let theirRate = try broker.toolThroughput(messages: burst)

    func percentile(_ values: [Double], _ p: Double) -> Double {
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p / 100))]
    }
    return [
        Metric(label: "mosquitto_pub → mosquitto_sub, p50 (\(samples) msgs)", value: percentile(theirs, 50), unit: "µs", reference: nil, goal: .none),
        Metric(label: "post A → callback B via 2 bridges, p50", value: percentile(ours, 50), unit: "µs",
               reference: percentile(theirs, 50), goal: .atMost(3)),
        Metric(label: "mosquitto_pub → mosquitto_sub, p99", value: percentile(theirs, 99), unit: "µs", reference: nil, goal: .none),
        Metric(label: "post A → callback B via 2 bridges, p99", value: percentile(ours, 99), unit: "µs",
               reference: percentile(theirs, 99), goal: .atMost(3)),
        Metric(label: "mosquitto_pub -l → mosquitto_sub -C, \(burst) msgs", value: theirRate, unit: "msg/s", reference: nil, goal: .none),
        Metric(label: "posts A → callbacks B via 2 bridges, \(burst)", value: ourRate, unit: "msg/s",
               reference: theirRate, goal: .atLeast(0.5)),
    ]
}

/// A mosquitto for the suite on 127.0.0.1 and a free port, and the reference runs with its
/// own command-line clients (QoS 1, as the bridges use).
final class BenchBroker {
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

    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// One message at a time through mosquitto_pub -l (one line, one message) to mosquitto_sub:
    /// each payload is its send time; the reader subtracts it on arrival (same clock).
    func toolLatency(samples: Int) throws -> [Double] {
        let (sub, subOut) = try tool("mosquitto_sub", ["-t", "ref/latency", "-q", "1"])
        defer { sub.terminate(); sub.waitUntilExit() }
        let (pub, pubIn) = try toolWithInput("mosquitto_pub", ["-t", "ref/latency", "-q", "1", "-l"])
        defer { try? pubIn.close(); pub.waitUntilExit() }
        let reader = LineReader(subOut)
        // Until the subscription is in place, messages vanish: send until one comes back.
        repeat { pubIn.write(Data("0\n".utf8)) } while reader.line(timeout: 0.2) == nil
        while reader.line(timeout: 0.3) != nil {}
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
    func toolThroughput(messages: Int) throws -> Double {
        let (sub, subOut) = try tool("mosquitto_sub", ["-t", "ref/burst", "-q", "1", "-C", "\(messages + 1)"])
        let (pub, pubIn) = try toolWithInput("mosquitto_pub", ["-t", "ref/burst", "-q", "1", "-l"])
        let reader = LineReader(subOut)
        repeat { pubIn.write(Data("ready\n".utf8)) } while reader.line(timeout: 0.2) == nil
        let started = DispatchTime.now().uptimeNanoseconds
        // Received messages beyond the first `ready` are counted up to -C.
        let body = Data(String(repeating: "x\n", count: messages).utf8)
        pubIn.write(body)
        sub.waitUntilExit()
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        try? pubIn.close()
        pub.waitUntilExit()
        return Double(messages) / elapsed
    }

    /// Runs a mosquitto client against the broker: its stdout (`tool`) or its stdin (`toolWithInput`).
    private func tool(_ name: String, _ arguments: [String]) throws -> (Process, FileHandle) {
        try launch(name, arguments, feed: false)
    }

    private func toolWithInput(_ name: String, _ arguments: [String]) throws -> (Process, FileHandle) {
        try launch(name, arguments, feed: true)
    }

    private func launch(_ name: String, _ arguments: [String], feed: Bool) throws -> (Process, FileHandle) {
        let process = Process(), pipe = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/" + name)
        process.arguments = ["-h", "127.0.0.1", "-p", "\(port)"] + arguments
        if feed { process.standardInput = pipe } else { process.standardOutput = pipe }
        try process.run()
        return (process, feed ? pipe.fileHandleForWriting : pipe.fileHandleForReading)
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

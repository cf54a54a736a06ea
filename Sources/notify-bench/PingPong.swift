import DarwinNotify
import DarwinNotifyFoundation
import Dispatch
import Foundation
import Synchronization

/// Post → callback latency in another process, measured as a ping-pong: an echo process observes
/// PING and posts PONG from its callback; the pinger times post(PING) → its PONG callback.
/// Both legs are post → callback in another process, so one-way latency = round trip / 2.
enum PingPong {
    static let ping = "bench.ping", pong = "bench.pong"

    enum Variant: String, CaseIterable {
        case floor = "raw libdbus floor (C, no wrapper)"
        case cCallback = "C callback (CNotify)"
        /// The same with the fast path off in both processes: the bus path, in the same run.
        case cBusOnly = "C callback, bus only (fast path off)"
        /// Both processes opted into direct only: no bus copies to read, route and drop.
        case cDirectOnly = "C callback, direct only (no bus copy)"
        case swiftClosure = "Swift closure (DarwinNotify)"
        case swiftDirect = "Swift closure, queue: nil"
        case swiftAsync = "Swift AsyncSequence, its executor"
        case swiftAsyncPlain = "Swift AsyncSequence, no executor"
        case distributed = "distributed, 1 KiB userInfo (queue: nil)"
        /// No daemon between the processes: the candidates of a same-host fast path (issue 23).
        case peer = "libdbus peer to peer (C, no daemon)"
        case uds = "plain Unix socket (C, no daemon)"
    }

    /// The userInfo of the `distributed` variant: 16 strings of 56 bytes under 8-byte keys, about
    /// 1 KiB on the wire (a{sv}: 16 × (4 + 8 + 1 + 4 + 4 + 56 + 1) = 1,248 bytes with alignment).
    static func kibUserInfo() -> [AnyHashable: Any] {
        Dictionary(uniqueKeysWithValues: (0..<16).map { (String(format: "key%05d", $0), String(repeating: "v", count: 56)) })
    }

    /// Runs `samples` round trips after `warmup` unrecorded ones.
    static func measure(_ variant: Variant, bus: String, samples: Int, warmup: Int) async throws -> Samples {
        let env = ["DARWIN_NOTIFY_BUS": bus]
        // The no-daemon floors listen on a socket of their own, in a directory made for it.
        let socketDirectory = NSTemporaryDirectory() + "notify-bench-floor-" + UUID().uuidString
        if variant == .peer || variant == .uds {
            try FileManager.default.createDirectory(atPath: socketDirectory, withIntermediateDirectories: false,
                                                    attributes: [.posixPermissions: 0o700])
        }
        defer { try? FileManager.default.removeItem(atPath: socketDirectory) }
        let socket = socketDirectory + "/s"
        let echo: Child
        switch variant {
        case .peer: echo = try Child("dbus-floor", ["peer-echo", "unix:path=" + socket, ping, pong])
        case .uds: echo = try Child("dbus-floor", ["uds-echo", socket, ping, pong])
        case .floor: echo = try Child("dbus-floor", ["echo", ping, pong], environment: env)
        case .cCallback: echo = try Child("cnotify-probe", ["bench-echo", ping, pong], environment: env)
        case .cBusOnly: echo = try Child("cnotify-probe", ["bench-echo", ping, pong], environment: env.merging(["DARWIN_NOTIFY_FAST_PATH": "0"]) { $1 })
        case .cDirectOnly: echo = try Child("cnotify-probe", ["bench-echo", ping, pong], environment: env.merging(["DARWIN_NOTIFY_FAST_PATH": "direct"]) { $1 })
        case .swiftClosure: echo = try Child("notify-bench", ["_swift-echo", ping, pong], environment: env)
        case .swiftAsync: echo = try Child("notify-bench", ["_swift-echo-async", ping, pong], environment: env)
        case .swiftAsyncPlain: echo = try Child("notify-bench", ["_swift-echo-async-plain", ping, pong], environment: env)
        case .swiftDirect: echo = try Child("notify-bench", ["_swift-echo-direct", ping, pong], environment: env)
        case .distributed: echo = try Child("notify-bench", ["_distributed-echo", ping, pong], environment: env)
        }
        defer { echo.stop() }
        _ = try echo.readLine { $0 == "ready" }
        let total = samples + warmup
        var rtts: [UInt64]
        switch variant {
        case .floor: rtts = try parse(Child("dbus-floor", ["ping", ping, pong, "\(total)"], environment: env).readToEnd())
        case .peer: rtts = try parse(Child("dbus-floor", ["peer-ping", "unix:path=" + socket, ping, pong, "\(total)"]).readToEnd())
        case .uds: rtts = try parse(Child("dbus-floor", ["uds-ping", socket, ping, pong, "\(total)"]).readToEnd())
        case .cCallback: rtts = try parse(Child("cnotify-probe", ["bench-ping", ping, pong, "\(total)"], environment: env).readToEnd())
        case .cBusOnly:
            rtts = try parse(Child("cnotify-probe", ["bench-ping", ping, pong, "\(total)"],
                                   environment: env.merging(["DARWIN_NOTIFY_FAST_PATH": "0"]) { $1 }).readToEnd())
        case .cDirectOnly:
            rtts = try parse(Child("cnotify-probe", ["bench-ping", ping, pong, "\(total)"],
                                   environment: env.merging(["DARWIN_NOTIFY_FAST_PATH": "direct"]) { $1 }).readToEnd())
        case .swiftClosure: rtts = try swiftClosurePing(bus: bus, count: total, queue: DispatchQueue(label: "bench.pong"))
        case .swiftDirect: rtts = try swiftClosurePing(bus: bus, count: total, queue: nil)
        case .swiftAsync: rtts = try await swiftAsyncPing(bus: bus, count: total, preferred: true)
        case .swiftAsyncPlain: rtts = try await swiftAsyncPing(bus: bus, count: total, preferred: false)
        case .distributed: rtts = try distributedPing(bus: bus, count: total)
        }
        var result = Samples()
        for rtt in rtts.dropFirst(warmup) { result.record(rtt / 2) }
        return result
    }

    private static func parse(_ text: String) throws -> [UInt64] {
        let values = text.split(separator: "\n").compactMap { UInt64($0) }
        guard !values.isEmpty else { throw BenchError("no samples in the pinger's output") }
        return values
    }

    private static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    private static func swiftClosurePing(bus: String, count: Int, queue: DispatchQueue?) throws -> [UInt64] {
        let center = try NotifyCenter(bus: bus)
        let arrived = DispatchSemaphore(value: 0)
        // The latency ends when the closure runs, so it takes the time itself.
        let pongAt = Mutex<UInt64>(0)
        let observation = try center.observe(pong, queue: queue) { _ in
            let t = now()
            pongAt.withLock { $0 = t }
            arrived.signal()
        }
        defer { observation.cancel() }
        var rtts: [UInt64] = []
        rtts.reserveCapacity(count)
        for _ in 0..<count {
            let t0 = now()
            try center.post(ping)
            guard arrived.wait(timeout: .now() + 30) == .success else { throw BenchError("no pong within 30 s") }
            rtts.append(pongAt.withLock { $0 } - t0)
        }
        return rtts
    }

    /// The loop as ThreadingAndDelivery.md shows it: iterated with the center's delivery executor
    /// preferred, so the task resumes on the thread that delivered the pong; or a plain loop, whose
    /// task resumes on the global executor (a thread woken for each pong).
    private static func swiftAsyncPing(bus: String, count: Int, preferred: Bool) async throws -> [UInt64] {
        let center = try NotifyCenter(bus: bus)
        let pongs = try center.notifications(named: pong)
        defer { pongs.cancel() }
        return try await withTaskExecutorPreference(preferred ? center.deliveryExecutor : nil) {
            var iterator = pongs.makeAsyncIterator()
            var rtts: [UInt64] = []
            rtts.reserveCapacity(count)
            for _ in 0..<count {
                let t0 = now()
                try center.post(ping)
                guard await iterator.next() != nil else { throw BenchError("the pong sequence ended") }
                rtts.append(now() - t0)
            }
            return rtts
        }
    }

    /// The distributed round trip: a 1 KiB userInfo each way, closures on the centers' delivery queues.
    private static func distributedPing(bus: String, count: Int) throws -> [UInt64] {
        let center = try DistributedNotificationCenter(bus: bus)
        let arrived = DispatchSemaphore(value: 0)
        let pongAt = Mutex<UInt64>(0)
        let token = try center.observe(Notification.Name(pong), object: nil, behavior: .hold, delivery: .deliveryQueue,
                                       skippingOwnPosts: false) { note in
            let t = now()
            guard note.userInfo?.count == 16 else { return } // a pong without its payload is no pong
            pongAt.withLock { $0 = t }
            arrived.signal()
        }
        defer { center.removeObserver(token) }
        var rtts: [UInt64] = []
        rtts.reserveCapacity(count)
        let userInfo = kibUserInfo()
        for _ in 0..<count {
            let t0 = now()
            try center.checkedPost(name: Notification.Name(ping), object: nil, userInfo: userInfo)
            guard arrived.wait(timeout: .now() + 30) == .success else { throw BenchError("no distributed pong within 30 s") }
            rtts.append(pongAt.withLock { $0 } - t0)
        }
        return rtts
    }

    /// The `_distributed-echo PING PONG` role: answers each distributed ping with its userInfo.
    static func runDistributedEcho(ping: String, pong: String) throws -> Never {
        let center = try DistributedNotificationCenter(bus: ProcessInfo.processInfo.environment["DARWIN_NOTIFY_BUS"] ?? "embedded")
        let token = try center.observe(Notification.Name(ping), object: nil, behavior: .hold, delivery: .deliveryQueue,
                                       skippingOwnPosts: false) { note in
            center.postNotificationName(Notification.Name(pong), object: nil, userInfo: note.userInfo)
        }
        FileHandle.standardOutput.write(Data("ready\n".utf8)) // unbuffered: the readiness handshake
        while readLine() != nil {} // until the benchmark closes our stdin
        center.removeObserver(token)
        exit(0)
    }

    /// The `_swift-echo[-direct] PING PONG` role: a Swift closure observer that answers each ping,
    /// on a serial queue or (`queue` nil) on the delivery thread.
    /// The echo of the AsyncSequence variants: the same loop as the pinger's, with or without the
    /// center's delivery executor preferred (a post each way, so each way pays what the row names).
    static func runSwiftAsyncEcho(ping: String, pong: String, preferred: Bool) async throws -> Never {
        let center = try NotifyCenter(bus: ProcessInfo.processInfo.environment["DARWIN_NOTIFY_BUS"] ?? "embedded")
        let pings = try center.notifications(named: ping)
        Thread.detachNewThread {
            while readLine() != nil {} // until the benchmark closes our stdin
            exit(0)
        }
        FileHandle.standardOutput.write(Data("ready\n".utf8)) // unbuffered: the readiness handshake
        await withTaskExecutorPreference(preferred ? center.deliveryExecutor : nil) {
            for await _ in pings { try? center.post(pong) }
        }
        exit(0)
    }

    static func runSwiftEcho(ping: String, pong: String, queue: DispatchQueue?) throws -> Never {
        let center = try NotifyCenter(bus: ProcessInfo.processInfo.environment["DARWIN_NOTIFY_BUS"] ?? "embedded")
        let observation = try center.observe(ping, queue: queue) { _ in
            try? center.post(pong)
        }
        FileHandle.standardOutput.write(Data("ready\n".utf8)) // unbuffered: the readiness handshake
        while readLine() != nil {} // until the benchmark closes our stdin
        observation.cancel()
        exit(0)
    }
}

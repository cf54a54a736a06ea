import DarwinNotify
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Runs an `Invocation`: posts and registrations in order, then waits until every counted
/// registration has seen its notifications (forever if a `-w` registration exists).
public final class Runner: Sendable {
    private let invocation: Invocation
    private let out: @Sendable (String) -> Void
    private let err: @Sendable (String) -> Void
    private let queue = DispatchQueue(label: "notifyutil.watch")
    private let remaining = Mutex<(counted: Int, forever: Int)>((0, 0))
    private let finished = DispatchSemaphore(value: 0)
    private let observations = Mutex<[NotificationObservation]>([])

    public init(
        _ invocation: Invocation,
        out: @escaping @Sendable (String) -> Void,
        err: @escaping @Sendable (String) -> Void
    ) {
        self.invocation = invocation
        self.out = out
        self.err = err
    }

    /// Returns the exit status: 0 on success, 1 when a command failed.
    public func run() -> Int32 {
        var center: NotifyCenter?
        func getCenter() throws -> NotifyCenter {
            if let center { return center }
            let made = try invocation.bus.map { try NotifyCenter(bus: $0) } ?? NotifyCenter.default
            center = made
            return made
        }
        for (index, command) in invocation.commands.enumerated() {
            do {
                switch command {
                case .post(let name):
                    try getCenter().post(name)
                    let more = index + 1 < invocation.commands.count
                    if more && invocation.napMilliseconds > 0 {
                        try getCenter().flush()
                        usleep(UInt32(min(invocation.napMilliseconds, 4_000_000)) * 1000)
                    }
                case .wait(let name, let count):
                    try register(name, count: count, center: getCenter())
                case .busStatus:
                    let status = try EmbeddedBus.status()
                    out("\(status.running ? "running" : "stopped") \(status.address)\n")
                case .busStart:
                    out("\(try EmbeddedBus.start())\n")
                case .busStop:
                    try EmbeddedBus.stop()
                }
            } catch let error as NotifyError {
                err("notifyutil: \(describe(command)): \(error)\n")
                return 1
            } catch {
                err("notifyutil: \(describe(command)): \(error)\n")
                return 1
            }
        }
        if let center { try? center.flush() }
        let waiting = remaining.withLock { $0.counted > 0 || $0.forever > 0 }
        if waiting { finished.wait() }
        return 0
    }

    private func describe(_ command: Invocation.Command) -> String {
        switch command {
        case .post(let name), .wait(let name, _): return name
        case .busStatus: return "--bus-status"
        case .busStart: return "--bus-start"
        case .busStop: return "--bus-stop"
        }
    }

    private func register(_ name: String, count: Int?, center: NotifyCenter) throws {
        remaining.withLock {
            if count == nil { $0.forever += 1 } else { $0.counted += 1 }
        }
        let left = Mutex(count ?? 0)
        let tokenBox = Mutex<UInt64>(0)
        let observation = try center.observe(name, queue: queue) { [self] name in
            report(name, token: tokenBox.withLock { $0 })
            guard count != nil else { return }
            let done = left.withLock { value -> Bool in
                value -= 1
                return value == 0
            }
            if done {
                let allDone = remaining.withLock { state -> Bool in
                    state.counted -= 1
                    return state.counted == 0 && state.forever == 0
                }
                if allDone { finished.signal() }
            }
        }
        tokenBox.withLock { $0 = observation.registrationID }
        observations.withLock { $0.append(observation) }
    }

    private func report(_ name: String, token: UInt64) {
        switch invocation.output {
        case .quiet: return
        case .key: out("\(name)\n")
        case .verbose:
            var now = timeval()
            gettimeofday(&now, nil)
            // Apple's format: milliseconds as three digits, rounded, from the microseconds.
            let msec = String(String(Int(now.tv_usec) + 1_000_500).dropFirst().prefix(3))
            out("[\(token)] \(now.tv_sec).\(msec) \(name) 0 port\n")
        }
    }
}

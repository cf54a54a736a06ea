import DarwinNotify
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Runs an `Invocation`: posts, state commands and registrations in order, then waits until
/// every counted registration has seen its notifications (forever if a `-w` registration exists).
package final class Runner: Sendable {
    private let invocation: Invocation
    private let out: @Sendable (String) -> Void
    private let err: @Sendable (String) -> Void
    /// Every event is handled here, one at a time, as Apple's "Watch Q".
    let queue = DispatchQueue(label: "notifyutil.watch")
    private let registrations = Mutex<[Registration]>([])
    private let signalSources = SignalSources()

    /// The signal sources of the run, by signal number.
    final class SignalSources: @unchecked Sendable {
        // @unchecked Sendable: read and written on the runner's serial watch queue only.
        var sources: [Int32: DispatchSourceSignal] = [:]
    }
    private let finished = DispatchSemaphore(value: 0)

    package init(
        _ invocation: Invocation,
        out: @escaping @Sendable (String) -> Void,
        err: @escaping @Sendable (String) -> Void
    ) {
        self.invocation = invocation
        self.out = out
        self.err = err
    }

    /// Returns the exit status: 0 on success, 1 when a command failed, 3 when `--bus-status` found
    /// the embedded bus stopped (as `systemctl is-active`).
    package func run() -> Int32 {
        var center: NotifyCenter?
        var exitStatus: Int32 = 0
        func getCenter() throws -> NotifyCenter {
            if let center { return center }
            let made = try invocation.bus.map { try NotifyCenter(bus: $0) } ?? NotifyCenter.default
            center = made
            return made
        }
        for command in invocation.commands {
            do {
                switch command {
                case .post(let name):
                    try getCenter().post(name)
                    if invocation.napMilliseconds > 0 { // Apple: after every post
                        try getCenter().flush()
                        usleep(UInt32(min(invocation.napMilliseconds, 4_000_000)) * 1000)
                    }
                case .monitor:
                    let monitor = try BusMonitor(bus: invocation.bus)
                    if !invocation.json { err("notifyutil: monitoring every post on the bus (Ctrl-C to stop)\n") }
                    try monitor.run(notice: { err("notifyutil: \($0)\n") }) { post in out((invocation.json ? post.json : post.line) + "\n") }
                case .waitNamespace(let namespace, let count):
                    try queue.sync { try registerNamespace(namespace, count: count, center: getCenter()) }
                case .wait(let name, let count, let delivery):
                    // Registered from the watch queue, so no event is handled before it is listed.
                    try queue.sync { try register(name, count: count, delivery: delivery, center: getCenter()) }
                case .get(let name):
                    out("\(name) \(try getCenter().state(of: name))\n")
                case .set(let name, let value):
                    try getCenter().setState(value, for: name)
                case .busStatus:
                    let status = try EmbeddedBus.status()
                    if !status.running { exitStatus = 3 } // as `systemctl is-active`: scripts can test it
                    out("\(status.running ? "running" : "stopped") \(status.address)\n")
                    let scope = try EmbeddedBus.defaultBus()
                    switch scope.scope {
                    case "system": out("scope: system \(scope.address) (installed system-wide; the default for every user)\n")
                    case "embedded": out("scope: embedded \(scope.address) (per user; the default)\n")
                    default: out("scope: \(scope.scope) \(scope.address)\n")
                    }
                case .busStart:
                    out("\(try EmbeddedBus.start())\n")
                case .busStop:
                    do {
                        try EmbeddedBus.stop()
                    } catch {
                        guard error.code == .serverNotFound else { throw error }
                        out("not running\n") // the state asked for already holds
                    }
                }
            } catch {
                err("notifyutil: \(describe(command)): \(error)\n")
                return 1
            }
        }
        if let center {
            // The posts are written before the process ends, or it says they may not be.
            do { try center.flush() } catch { err("notifyutil: flush: \(error)\n"); return 1 }
        }
        if !registrations.withLock({ $0.isEmpty }) { finished.wait() }
        return exitStatus
    }

    private func describe(_ command: Invocation.Command) -> String {
        switch command {
        case .post(let name): return "-p \(shownName(name))"
        case .wait(let name, _, _): return "-w \(shownName(name))"
        case .waitNamespace(let namespace, _): return "-W \(shownName(namespace))"
        case .get(let name): return "-g \(shownName(name))"
        case .set(let name, _): return "-s \(shownName(name))"
        case .busStatus: return "--bus-status"
        case .busStart: return "--bus-start"
        case .busStop: return "--bus-stop"
        case .monitor: return "--monitor"
        }
    }

    /// One registration of the run, with what is left of its count. Touched on `queue` only.
    final class Registration: @unchecked Sendable {
        // @unchecked Sendable: created and used on the runner's serial watch queue only.
        let name: String
        let delivery: Invocation.Delivery
        var left: Int?
        var token: NotifyToken?
        var observation: NotificationObservation?
        /// The read, timer or signal source of file, check/plain and signal registrations.
        var source: DispatchSourceProtocol?
        var id: Int64 = 0
        init(name: String, delivery: Invocation.Delivery, left: Int?) {
            self.name = name
            self.delivery = delivery
            self.left = left
        }
    }

    /// A namespace registration (`-W`): each post is reported by the name it was posted under.
    private func registerNamespace(_ namespace: String, count: Int?, center: NotifyCenter) throws {
        let reg = Registration(name: namespace, delivery: .port, left: count)
        let observation = try center.observe(namespace: namespace, queue: queue) { [self] name in fired(reg, center: center, name: name) }
        reg.observation = observation
        reg.id = Int64(observation.registrationID)
        registrations.withLock { $0.append(reg) }
    }

    private func register(_ name: String, count: Int?, delivery: Invocation.Delivery, center: NotifyCenter) throws {
        let reg = Registration(name: name, delivery: delivery, left: count)
        switch delivery {
        case .port:
            let observation = try center.observe(name, queue: queue) { [self] _ in fired(reg, center: center) }
            reg.observation = observation
            reg.id = Int64(observation.registrationID)
        case .dispatch:
            let token = try center.dispatchToken(name, queue: queue) { [self] _ in fired(reg, center: center) }
            reg.token = token
        case .file:
            let token = try center.fileDescriptorToken(name)
            reg.token = token
            let source = DispatchSource.makeReadSource(fileDescriptor: token.fileDescriptor!, queue: queue)
            source.setEventHandler { [self] in
                for _ in (try? token.readPosts()) ?? [] where !token.isCancelled { fired(reg, center: center) }
            }
            source.resume()
            reg.source = source
        case .check, .plain:
            let token = try center.checkingToken(name)
            _ = try token.check() // the first check is always true
            reg.token = token
            let timer = DispatchSource.makeTimerSource(queue: queue)
            timer.schedule(deadline: .now() + .milliseconds(100), repeating: .milliseconds(100))
            timer.setEventHandler { [self] in
                if !token.isCancelled, (try? token.check()) == true { fired(reg, center: center) }
            }
            timer.resume()
            reg.source = timer
        case .signal(let number):
            // One source per signal, as Apple's: it prints SIGNAL once and checks every token of it.
            // Made before the registration: a post that comes in between sends the signal, whose
            // default action (SIGUSR1's: terminate) would end the run.
            if signalSources.sources[number] == nil {
                // Ignored, so the default action never runs; set before the source exists, as
                // libdispatch installs its own handler when the source resumes.
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
                source.setEventHandler { [self] in
                    if invocation.output != .quiet { out("SIGNAL \(number)\n") }
                    let listed = registrations.withLock { $0.filter { $0.delivery == .signal(number) } }
                    for reg in listed where !(reg.token?.isCancelled ?? true) && (try? reg.token?.check()) == true {
                        fired(reg, center: center)
                    }
                }
                source.resume()
                signalSources.sources[number] = source
            }
            let token = try center.signalToken(name, signal: number)
            _ = try token.check()
            reg.token = token
        }
        if let token = reg.token { reg.id = Int64(token.rawValue) }
        registrations.withLock { $0.append(reg) }
    }

    /// One notification for `reg` (on the watch queue): report it, count it down, and end the run
    /// once no registration is left.
    private func fired(_ reg: Registration, center: NotifyCenter, name: String? = nil) {
        guard reg.left != 0, !(reg.token?.isCancelled ?? false), !(reg.observation?.isCancelled ?? false) else { return }
        report(reg, center: center, name: name ?? reg.name)
        guard let left = reg.left else { return }
        reg.left = left - 1
        guard left - 1 == 0 else { return }
        reg.token?.cancel()
        reg.observation?.cancel()
        reg.source?.cancel()
        let empty = registrations.withLock { list -> Bool in
            list.removeAll { $0 === reg }
            return list.isEmpty
        }
        if empty { finished.signal() }
    }

    private func report(_ reg: Registration, center: NotifyCenter, name: String) {
        switch invocation.output {
        case .quiet: return
        case .key: out("\(name)\n")
        case .verbose:
            var now = timeval()
            gettimeofday(&now, nil)
            // Apple's format: milliseconds as three digits, rounded, from the microseconds.
            let msec = String(String(Int(now.tv_usec) + 1_000_500).dropFirst().prefix(3))
            let state: String
            do { state = String(try reg.token?.state() ?? center.state(of: name)) } catch {
                state = ": \(error)"
            }
            out("[\(reg.id)] \(now.tv_sec).\(msec) \(name) \(state) \(reg.delivery.typeName)\n")
        }
    }
}

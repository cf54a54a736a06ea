import DarwinNotify
import Dispatch
import Synchronization

/// A failure after which reading again at once would fail again (an I/O error), as opposed to a
/// damaged or lost message, after which the next message can be read.
private func isTransient(_ result: Result<WormholeMessage, WormholeError>) -> Bool {
    guard case .failure(let error) = result else { return false }
    return error.code != .corruptMessage && error.code != .messagesLost
}

/// A listener's token (`Wormhole.listen`). Keep it: cancelling or releasing it stops the listener.
public final class WormholeListener: Sendable {
    private let core: ListenerCore

    init(source: any MessageSource, queue: DispatchQueue?,
         handler: @escaping @Sendable (Result<WormholeMessage, WormholeError>) -> Void) {
        core = ListenerCore(source: source, queue: queue, handler: handler)
    }

    func start(center: NotifyCenter, name: String) throws(WormholeError) {
        try core.start(center: center, name: name)
    }

    /// Stops the listener (MMWormhole `stopListeningForMessageWithIdentifier:`, for this listener
    /// only). No handler starts after it returns, except one already running. A named queue
    /// listener releases its name.
    public func cancel() { core.cancel() }

    public var isCancelled: Bool { core.isCancelled }

    /// Cancels, then waits until a handler still running has returned and a named queue
    /// listener's cursor is saved and its name released. Never call it from the handler.
    public func cancelAndWait() { core.cancelAndWait() }

    deinit { core.cancel() }
}

/// The moving parts of a listener. Announcements only schedule a drain on the listener's serial
/// queue; the drain reads every message not yet delivered, so bursts of announcements coalesce
/// and each message is delivered once, in order.
final class ListenerCore: @unchecked Sendable {
    // @unchecked Sendable: `source` is used only on `drainQueue` (serial), `observation` is behind
    // a Mutex, and the flags are atomics.
    private let source: any MessageSource
    private let drainQueue: DispatchQueue
    private let handler: @Sendable (Result<WormholeMessage, WormholeError>) -> Void
    private let scheduled = Atomic<Bool>(false)
    private let cancelled = Atomic<Bool>(false)
    private let observation = Mutex<NotificationObservation?>(nil)

    init(source: any MessageSource, queue: DispatchQueue?,
         handler: @escaping @Sendable (Result<WormholeMessage, WormholeError>) -> Void) {
        self.source = source
        // Serial, and runs on the user's queue: handlers never overlap, even on a concurrent
        // queue. Without a user queue it is the listener's own queue (one hop less than a
        // queue targeting another).
        drainQueue = queue.map { DispatchQueue(label: "Wormhole.drain", target: $0) } ?? DispatchQueue(label: "Wormhole.listener")
        self.handler = handler
    }

    var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    func start(center: NotifyCenter, name: String) throws(WormholeError) {
        do {
            let token = try center.observe(name, queue: nil) { [weak self] _ in self?.schedule() }
            observation.withLock { $0 = token }
        } catch {
            drainQueue.async { [self] in source.close() }
            throw WormholeError.notification(error)
        }
        // Catch up: a queue listener's backlog, or a pass made while registering.
        schedule()
    }

    private func schedule() {
        guard !scheduled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        drainQueue.async { [self] in
            scheduled.store(false, ordering: .releasing)
            drain()
        }
    }

    private func drain() {
        while !isCancelled, let result = source.next() {
            handler(result)
            source.commit()
            if isTransient(result) || !source.readsUntilEmpty { break }
        }
    }

    func cancel() {
        guard !cancelled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        observation.withLock { $0?.cancel(); $0 = nil }
        drainQueue.async { [self] in source.close() }
    }

    func cancelAndWait() {
        cancel()
        drainQueue.sync {}
    }
}

/// The messages of an identifier as an async sequence (`Wormhole.messages(for:)`). Damaged or lost
/// messages arrive as failures and the sequence goes on. Ending the iteration (or `cancel()`)
/// stops listening.
public struct WormholeMessages: AsyncSequence, Sendable {
    public typealias Element = Result<WormholeMessage, WormholeError>
    let pump: MessagePump

    public struct AsyncIterator: AsyncIteratorProtocol {
        let pump: MessagePump
        public mutating func next() async -> Element? { await pump.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(pump: pump) }

    public func cancel() { pump.cancel() }
}

/// Drives an async iteration: `next()` reads from the source, and waits for an announcement only
/// when caught up. The previous message is committed when the next one is asked for.
final class MessagePump: Sendable {
    private struct Wake {
        var pending = false
        var cancelled = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private struct Reader: @unchecked Sendable {
        // @unchecked Sendable: only touched inside `reader.withLock`.
        let source: any MessageSource
        var mustCommit = false
        var waitFirst = false
    }

    private let reader: Mutex<Reader>
    private let wake = Mutex(Wake())
    private let observation = Mutex<NotificationObservation?>(nil)

    init(source: any MessageSource) {
        reader = Mutex(Reader(source: source))
    }

    func start(center: NotifyCenter, name: String) throws(WormholeError) {
        do {
            let token = try center.observe(name, queue: nil) { [weak self] _ in self?.notify() }
            observation.withLock { $0 = token }
        } catch {
            reader.withLock { $0.source.close() }
            throw WormholeError.notification(error)
        }
    }

    func next() async -> Result<WormholeMessage, WormholeError>? {
        while true {
            if wake.withLock({ $0.cancelled }) { return nil }
            let result = reader.withLock { r -> Result<WormholeMessage, WormholeError>? in
                if r.mustCommit { r.source.commit(); r.mustCommit = false }
                // After a transient error, or a latest-message read, wait for the next announcement.
                guard !r.waitFirst else { r.waitFirst = false; return nil }
                guard let result = r.source.next() else { return nil }
                r.mustCommit = true
                r.waitFirst = isTransient(result) || !r.source.readsUntilEmpty
                return result
            }
            if let result { return result }
            await waitForAnnouncement()
        }
    }

    private func waitForAnnouncement() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = wake.withLock { w -> Bool in
                    if w.pending || w.cancelled { w.pending = false; return true }
                    w.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            cancel()
        }
    }

    private func notify() {
        let waiter = wake.withLock { w -> CheckedContinuation<Void, Never>? in
            guard let waiter = w.waiter else { w.pending = true; return nil }
            w.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    func cancel() {
        let waiter = wake.withLock { w -> CheckedContinuation<Void, Never>? in
            w.cancelled = true
            defer { w.waiter = nil }
            return w.waiter
        }
        observation.withLock { $0?.cancel(); $0 = nil }
        waiter?.resume()
    }

    deinit {
        observation.withLock { $0?.cancel() }
        reader.withLock { $0.source.close() }
    }
}

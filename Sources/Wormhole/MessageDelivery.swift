// MessageDelivery.swift: the one delivery state machine behind listeners and async sequences.
import DarwinNotify
import Dispatch
import Synchronization

/// A failure after which reading again at once would fail again (an I/O error), as opposed to a
/// damaged or lost message, after which the next message can be read.
private func isTransient(_ result: Result<WormholeMessage, WormholeError>) -> Bool {
    guard case .failure(let error) = result else { return false }
    return error.code != .corruptMessage && error.code != .messagesLost && error.code != .damagedCursor
}

/// Where a pushing machine reads and runs its handler.
enum DeliveryPlacement {
    /// On a serial queue of the machine's own, which targets this one.
    case queue(DispatchQueue)
    /// On a serial queue of the machine's own.
    case ownQueue
    /// No thread hop: on the thread that announces (the center's delivery thread), or for the
    /// catch-up at start a background thread; one pump at a time (`pumpHere`).
    case announcingThread
}

/// Reads a `MessageSource` on one serial queue and hands each result to its consumer: pushed to
/// a handler (`Wormhole.listen`), or pulled by an async iterator (`Wormhole.messages`).
/// Announcements only schedule a pump on that queue; a pump reads every message not yet handed
/// out, so bursts of announcements coalesce and each message is handed out once, in order. File
/// I/O happens only in a pump, never under a lock and never on a task's thread.
///
/// A handler placed on the announcing thread (`listen(queue: nil)`) has no queue: the thread an
/// announcement arrives on pumps, unless another is pumping, which then pumps once more. So
/// pumps never overlap, and an announcement during one is never lost.
///
/// After a transient error, or after a latest-message read (one message per announcement), the
/// machine waits for the next announcement before reading again. A handler's message is committed
/// when the handler returns; an iterator's when the next one is asked for.
final class MessageDelivery: Sendable {
    typealias Element = Result<WormholeMessage, WormholeError>

    // nonisolated(unsafe): the five below are used only on `drainQueue`, which is serial, or
    // (placed on the announcing thread) only by the thread that holds `pumping`.
    private nonisolated(unsafe) let source: any MessageSource
    private nonisolated(unsafe) var needsAnnouncement = false
    private nonisolated(unsafe) var mustCommit = false
    private nonisolated(unsafe) var waiter: CheckedContinuation<Element?, Never>?
    private nonisolated(unsafe) var sourceClosed = false

    private let drainQueue: DispatchQueue
    private let handler: (@Sendable (Element) -> Void)?
    /// A handler placed on the announcing thread (`DeliveryPlacement.announcingThread`).
    private let inline: Bool
    /// Held by the thread that pumps, when `inline`.
    private let pumping = Atomic<Bool>(false)
    /// Signalled once the source is closed, when `inline` (`cancelAndWait`).
    private let sourceClosedSignal = DispatchSemaphore(value: 0)
    /// The cancel contract of a handler (DarwinNotify's "Cancellation" article).
    private let gate = InvocationGate()
    private let scheduled = Atomic<Bool>(false)
    private let cancelled = Atomic<Bool>(false)
    private let observation = Mutex<NotificationObservation?>(nil)

    /// A pushing machine when `handler` is given, else a pulling one (whose placement is its own
    /// queue).
    init(source: any MessageSource, placement: DeliveryPlacement, handler: (@Sendable (Element) -> Void)?) {
        self.source = source
        // Serial, and runs on the user's queue: handlers never overlap, even on a concurrent
        // queue. Without a user queue it is the machine's own queue.
        if case .queue(let queue) = placement {
            drainQueue = DispatchQueue(label: "Wormhole.drain", target: queue)
        } else {
            drainQueue = DispatchQueue(label: "Wormhole.delivery")
        }
        self.handler = handler
        if case .announcingThread = placement, handler != nil { inline = true } else { inline = false }
    }

    var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    func start(center: NotifyCenter, name: String) throws(WormholeError) {
        do {
            let token = try center.observe(name, queue: nil) { [weak self] _ in self?.announce() }
            observation.withLock { $0 = token }
        } catch {
            drainQueue.async { [self] in closeSource() }
            throw WormholeError.notification(error)
        }
        // Catch up: a queue listener's backlog, or a pass made while registering. (An iterator
        // reads as soon as it asks.) Placed on the announcing thread, not on the caller's: the
        // handler must not run before `listen` has returned its token.
        if inline {
            DispatchQueue.global().async { [self] in pumpHere() }
        } else if handler != nil {
            announce()
        }
    }

    /// An announcement, on any thread: the drain queue looks again (placed on the announcing
    /// thread: this thread pumps, or the one pumping pumps again).
    private func announce() {
        if inline { return pumpHere() }
        guard !scheduled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        drainQueue.async { [self] in
            scheduled.store(false, ordering: .releasing)
            needsAnnouncement = false
            pump()
        }
    }

    /// Placed on the announcing thread: pumps here unless another thread is pumping, which then
    /// pumps once more (`scheduled` says so). Once cancelled, the pumping thread closes the
    /// source.
    private func pumpHere() {
        scheduled.store(true, ordering: .releasing)
        while scheduled.load(ordering: .acquiring) {
            guard !pumping.exchange(true, ordering: .acquiringAndReleasing) else { return }
            // An exchange, not a store: it reads the announcing thread's `true`, so this pump
            // starts after that announcement in every thread's view.
            _ = scheduled.exchange(false, ordering: .acquiringAndReleasing)
            needsAnnouncement = false
            pump()
            if isCancelled { closeSource() }
            pumping.store(false, ordering: .releasing)
        }
    }

    /// On `drainQueue` (or the thread holding `pumping`): hands out results while a consumer is
    /// ready for one.
    private func pump() {
        while !isCancelled, !needsAnnouncement, handler != nil || waiter != nil {
            guard let result = source.next() else { return }
            needsAnnouncement = isTransient(result) || !source.readsUntilEmpty
            if let handler {
                gate.run { handler(result) }
                source.commit()
            } else {
                mustCommit = true
                let parked = waiter
                waiter = nil
                parked?.resume(returning: result)
            }
        }
    }

    /// The next result for an iterator, waiting for an announcement when caught up; nil once
    /// cancelled. Asking commits the previous one.
    func next() async -> Element? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Element?, Never>) in
                drainQueue.async { [self] in
                    if mustCommit { source.commit(); mustCommit = false }
                    guard !isCancelled else { continuation.resume(returning: nil); return }
                    waiter = continuation
                    pump()
                }
            }
        } onCancel: {
            cancel()
        }
    }

    /// Stops: no handler starts after this returns, and none is running on another thread
    /// (one running on this thread, the handler cancelling itself, is not waited for). A parked
    /// iterator gets nil; the source (a named listener's cursor and name) is closed on the
    /// drain queue.
    func cancel() {
        guard !cancelled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        observation.withLock { $0?.cancel(); $0 = nil }
        gate.close()
        if inline { return pumpHere() }
        drainQueue.async { [self] in
            let parked = waiter
            waiter = nil
            parked?.resume(returning: nil)
            closeSource()
        }
    }

    /// Cancels, then waits until the source is closed. Never from the handler.
    func cancelAndWait() {
        cancel()
        if inline {
            // Closed by this thread in `cancel`, or by the one pumping when it finishes; by this
            // one after the handler returns, if it is the handler's thread.
            guard !gate.isRunningHere else { return }
            sourceClosedSignal.wait()
            sourceClosedSignal.signal()
        } else {
            drainQueue.sync {}
        }
    }

    private func closeSource() {
        guard !sourceClosed else { return }
        sourceClosed = true
        source.close()
        sourceClosedSignal.signal()
    }

    deinit {
        // No block is queued (each holds the machine), so the source is ours to close here.
        observation.withLock { $0?.cancel() }
        closeSource()
    }
}

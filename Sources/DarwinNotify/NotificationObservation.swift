// NotificationObservation.swift: a live observation, and the async sequence of one.
import CNotify
import Synchronization

/// Whether an observation was cancelled; read on every delivery, so an atomic, not a lock.
final class ObservationState: Sendable {
    private let cancelled = Atomic<Bool>(false)
    var isCancelled: Bool { cancelled.load(ordering: .acquiring) }
    /// Marks it cancelled; true only for the first caller.
    func markCancelled() -> Bool {
        !cancelled.exchange(true, ordering: .acquiringAndReleasing)
    }
}

/// A live observation. Cancel it explicitly, or let it go: releasing it cancels.
public final class NotificationObservation: Sendable {
    private let center: NotifyCenter
    private let id: UInt64
    private let state: ObservationState
    /// For observations on a queue: the hop the cancel contract closes.
    private let gate: InvocationGate?

    init(center: NotifyCenter, id: UInt64, state: ObservationState, gate: InvocationGate?) {
        self.center = center
        self.id = id
        self.state = state
        self.gate = gate
    }

    /// The C core's registration id (what `notifyutil -v` prints as the token).
    public var registrationID: UInt64 { id }

    /// Whether `cancel()` has run.
    public var isCancelled: Bool { state.isCancelled }

    /// Stops deliveries (`CNotify_center_remove_handler`), as <doc:Cancellation> says: once it
    /// returns, the handler does not start and is not running, unless called from inside it.
    /// Safe to call more than once, from any thread.
    public func cancel() {
        guard state.markCancelled() else { return }
        _ = CNotify_center_remove_handler(center.handle, id)
        gate?.close()
    }

    deinit { cancel() }
}

/// The posts of one name, as an async sequence (`NotifyCenter.notifications(named:)`).
///
/// Iterated with the center's ``DeliveryExecutor`` preferred
/// (`withTaskExecutorPreference(center.deliveryExecutor) { for await … }`), the task resumes on
/// the thread that delivered the post, with no other thread woken: the loop's body runs there,
/// between two deliveries, like a handler observed with `queue: nil` (keep it short). Without it,
/// the task resumes on the global executor, a thread hop away.
public struct Notifications: AsyncSequence, Sendable {
    public typealias Element = DarwinNotification
    let stream: AsyncStream<DarwinNotification>
    let observation: NotificationObservation

    public func makeAsyncIterator() -> AsyncStream<DarwinNotification>.Iterator {
        stream.makeAsyncIterator()
    }

    /// Ends the sequence's observation; iteration then finishes once buffered posts are read.
    public func cancel() { observation.cancel() }
}

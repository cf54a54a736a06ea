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

/// The context the C core holds for a Swift registration (see `NotifyCenter.register`).
final class HandlerBox: Sendable {
    let state: ObservationState
    let deliver: @Sendable (String) -> Void
    init(state: ObservationState, deliver: @escaping @Sendable (String) -> Void) {
        self.state = state
        self.deliver = deliver
    }
}

/// A live observation. Cancel it explicitly, or let it go: releasing it cancels.
public final class NotificationObservation: Sendable {
    private let center: NotifyCenter
    private let id: UInt64
    private let state: ObservationState

    init(center: NotifyCenter, id: UInt64, state: ObservationState) {
        self.center = center
        self.id = id
        self.state = state
    }

    /// The C core's registration id (what `notifyutil -v` prints as the token).
    public var registrationID: UInt64 { id }

    /// Whether `cancel()` has run.
    public var isCancelled: Bool { state.isCancelled }

    /// Stops deliveries (`CNotify_center_remove_handler`). Safe to call more than once, from any
    /// thread, the observation's own handler included.
    public func cancel() {
        guard state.markCancelled() else { return }
        _ = CNotify_center_remove_handler(center.handle, id)
    }

    deinit { cancel() }
}

/// The posts of one name, as an async sequence (`NotifyCenter.notifications(named:)`).
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

// DarwinNotificationBridge: Darwin notifications into Foundation's NotificationCenter and back,
// so code written for `NotificationCenter.default.addObserver(forName:object:queue:using:)` and
// `NotificationQueue` keeps working across processes (the CCHDarwinNotificationCenter pattern on
// Apple platforms). A module of its own: DarwinNotify itself never imports Foundation.
import DarwinNotify
import Foundation
import Synchronization

/// Forwards chosen Darwin notification names into a `NotificationCenter` (as `Notification.Name`s
/// of the same string) and, for exported names, posts made on that `NotificationCenter` out as
/// Darwin notifications to every process on the bus.
///
/// A notification the bridge forwards has the bridge as its `object`; the bridge never exports
/// those again, so a name both forwarded and exported does not loop.
public final class DarwinNotificationBridge: Sendable {
    /// Where forwarded posts go, and how.
    public enum Delivery: Sendable {
        /// `NotificationCenter.post(name:object:)` on the center's delivery thread, at once.
        case post
        /// `NotificationQueue.enqueue(_:postingStyle:coalesceMask:forModes:)` on the target's thread,
        /// which runs its run loop: posts that arrive together can coalesce (`.onName`), and
        /// `.whenIdle` waits until that run loop has nothing else to do. On Linux
        /// (swift-corelibs-foundation) a queued post is delivered only while the run loop runs
        /// with a source or timer in its mode: a run loop with nothing in it never posts it, so
        /// give that thread's run loop a timer (the project's test adds a 3,600 s one).
        case enqueue(EnqueueTarget, style: NotificationQueue.PostingStyle, coalesce: NotificationQueue.NotificationCoalescing)
    }

    public let center: NotifyCenter
    public let notificationCenter: NotificationCenter
    private let forwards = Mutex<[String: NotificationObservation]>([:])
    /// Foundation observer tokens (not Sendable: only handed back to `removeObserver`).
    private let exports = Mutex<[String: UncheckedBox<NSObjectProtocol>]>([:])

    public init(center: NotifyCenter = .default, notificationCenter: NotificationCenter = .default) {
        self.center = center
        self.notificationCenter = notificationCenter
    }

    deinit { invalidate() }

    /// Posts of the Darwin name `name`, from any process, become notifications named `name` on
    /// `notificationCenter`, delivered as `delivery` says.
    /// - Throws: `NotifyError` from the Darwin registration (a bad name, no bus).
    public func forward(_ name: Notification.Name, delivery: Delivery = .post) throws {
        let notificationCenter = notificationCenter
        let marker = Marker(bridge: self)
        let observation = try center.observe(name.rawValue, queue: nil) { _ in
            let note = Notification(name: name, object: marker.bridge)
            switch delivery {
            case .post:
                notificationCenter.post(note)
            case .enqueue(let target, let style, let coalesce):
                // NotificationQueue belongs to its thread: enqueue there, through its run loop.
                let box = UncheckedBox(note)
                target.perform { queue in
                    queue.enqueue(box.value, postingStyle: style, coalesceMask: coalesce, forModes: nil)
                }
            }
        }
        forwards.withLock { $0[name.rawValue]?.cancel(); $0[name.rawValue] = observation }
    }

    /// Notifications named `name` posted on `notificationCenter` (in this process) are posted as
    /// Darwin notifications too, to every process on the bus. Failures to post (no bus) are
    /// reported to `onError`, as a Foundation observer has no caller to throw to.
    public func export(_ name: Notification.Name, onError: @escaping @Sendable (NotifyError) -> Void = { _ in }) {
        let center = center
        let token = notificationCenter.addObserver(forName: name, object: nil, queue: nil) { [weak self] note in
            // What this bridge forwarded came from the bus: never send it back.
            if let self, let sender = note.object as AnyObject?, sender === self { return }
            do throws(NotifyError) { try center.post(name.rawValue) } catch { onError(error) }
        }
        let previous = exports.withLock { old -> UncheckedBox<NSObjectProtocol>? in
            defer { old[name.rawValue] = UncheckedBox(token) }
            return old[name.rawValue]
        }
        if let previous { notificationCenter.removeObserver(previous.value) }
    }

    /// Stops forwarding and exporting everything.
    public func invalidate() {
        forwards.withLock { for observation in $0.values { observation.cancel() }; $0.removeAll() }
        let tokens = exports.withLock { old -> [UncheckedBox<NSObjectProtocol>] in defer { old.removeAll() }; return Array(old.values) }
        for token in tokens { notificationCenter.removeObserver(token.value) }
    }
}

/// A weak reference to the bridge for the notifications it forwards (their `object`).
private final class Marker: Sendable {
    // nonisolated(unsafe): written once in init, read afterwards; `weak` needs a var.
    nonisolated(unsafe) weak var bridge: DarwinNotificationBridge?
    init(bridge: DarwinNotificationBridge) { self.bridge = bridge }
}

/// A value handed across threads that Swift cannot prove safe: a Notification made on the delivery
/// thread and read only on the queue's thread afterwards; an observer token only passed back to
/// `removeObserver`. @unchecked Sendable for exactly those uses.
struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// A thread's run loop and its `NotificationQueue`, for `.enqueue` deliveries. Make it on that
/// thread (`EnqueueTarget(notificationCenter:)`), then run the thread's run loop.
public final class EnqueueTarget: @unchecked Sendable {
    // @unchecked Sendable: `queue` is used only inside blocks run on the owning thread's run loop;
    // RunLoop.perform may be called from any thread.
    private let loop: RunLoop
    private let queue: NotificationQueue

    /// Binds the calling thread's run loop and a queue posting to `notificationCenter`.
    public init(notificationCenter: NotificationCenter = .default) {
        loop = RunLoop.current
        queue = NotificationQueue(notificationCenter: notificationCenter)
    }

    /// Runs `body` with the queue on the owning thread, at its run loop's next turn.
    func perform(_ body: @escaping @Sendable (NotificationQueue) -> Void) {
        let queue = UncheckedBox(self.queue)
        loop.perform { body(queue.value) }
        loop.perform {} // wakes a run loop waiting in its sources
    }
}

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
/// those again, so a name both forwarded and exported does not loop, and a post this process
/// exported is not forwarded back into it (its observers saw the original already).
///
/// A Darwin notification is a name and nothing more. An exported notification's `object` and
/// `userInfo` cannot travel with it: the bridge says so (``export(_:onError:onPayloadDropped:)``),
/// and carries them when told to use a ``DistributedNotificationCenter`` instead
/// (``export(_:through:onError:)``, ``forward(_:from:delivery:)``).
///
/// Lifetime: the bridge keeps itself alive while it forwards or exports anything, so one made and
/// not kept keeps working; ``invalidate()`` stops everything and lets it go.
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
    /// Forwarded names ("name") and namespaces ("name.*"), each with what stops it.
    private let forwards = Mutex<[String: UncheckedTransfer<() -> Void>]>([:])
    /// Foundation observer tokens (not Sendable: only handed back to `removeObserver`).
    private let exports = Mutex<[String: UncheckedTransfer<NSObjectProtocol>]>([:])
    /// Bridges that forward or export something: kept alive until invalidated.
    private static let live = Mutex<[ObjectIdentifier: DarwinNotificationBridge]>([:])

    public init(center: NotifyCenter = .default, notificationCenter: NotificationCenter = .default) {
        self.center = center
        self.notificationCenter = notificationCenter
    }

    deinit { stopAll() }

    private func keepAlive() { _ = Self.live.withLock { $0.updateValue(self, forKey: ObjectIdentifier(self)) } }

    /// Posts of `notification` (a name, or a namespace's forwarded name) on the target, as `delivery` says.
    private func deliver(_ note: Notification, _ delivery: Delivery) {
        switch delivery {
        case .post:
            notificationCenter.post(note)
        case .enqueue(let target, let style, let coalesce):
            // NotificationQueue belongs to its thread: enqueue there, through its run loop.
            let box = UncheckedTransfer(note)
            target.perform { queue in
                queue.enqueue(box.value, postingStyle: style, coalesceMask: coalesce, forModes: nil)
            }
        }
    }

    private func setForward(_ key: String, stop: @escaping () -> Void) {
        let previous = forwards.withLock { old -> UncheckedTransfer<() -> Void>? in
            defer { old[key] = UncheckedTransfer(stop) }
            return old[key]
        }
        previous?.value()
        keepAlive()
    }

    /// Posts of the Darwin name `name`, from any other process, become notifications named
    /// `name` on `notificationCenter`, delivered as `delivery` says. Posts this bridge's center
    /// made itself (an export) are not: this process's observers had the original.
    /// - Throws: `NotifyError` from the Darwin registration (a bad name, no bus).
    public func forward(_ name: Notification.Name, delivery: Delivery = .post) throws {
        let marker = WeakTransfer(self)
        let observation = try center.observePosts(name.rawValue) { [weak self] post in
            guard let self, !post.fromThisCenter else { return }
            self.deliver(Notification(name: name, object: marker.value), delivery)
        }
        setForward(name.rawValue, stop: { observation.cancel() })
    }

    /// Posts of `namespace` and of every name under it (`NotifyCenter.observe(namespace:)`)
    /// become notifications of their full name on `notificationCenter`. Stop with
    /// ``stopForwarding(namespace:)``.
    public func forward(namespace: String, delivery: Delivery = .post) throws {
        let marker = WeakTransfer(self)
        let observation = try center.observePosts(namespace: namespace) { [weak self] post in
            guard let self, !post.fromThisCenter else { return }
            self.deliver(Notification(name: Notification.Name(post.name), object: marker.value), delivery)
        }
        setForward(namespace + ".*", stop: { observation.cancel() })
    }

    /// Distributed notifications of `name` from other processes become notifications on
    /// `notificationCenter` with their `object` (the poster's string) and `userInfo`. Those that
    /// `distributed` posted itself (this process's exports) are not: its observers had them. Held
    /// while `distributed` is suspended, delivered on resume.
    public func forward(_ name: Notification.Name, from distributed: DistributedNotificationCenter,
                        delivery: Delivery = .post) throws(DistributedNotificationError) {
        // Not what `distributed` posted itself (an export of this process): its observers had it.
        let token = try distributed.observe(name, object: nil, behavior: .hold, delivery: .deliveryQueue, skippingOwnPosts: true) {
            [weak self] note in
            self?.deliver(note, delivery)
        }
        let box = UncheckedTransfer(token)
        setForward(name.rawValue, stop: { distributed.removeObserver(box.value) })
    }

    /// Stops forwarding `name` (either kind); the others go on.
    public func stopForwarding(_ name: Notification.Name) {
        forwards.withLock { $0.removeValue(forKey: name.rawValue) }?.value()
        releaseIfIdle()
    }

    /// Stops forwarding `namespace`.
    public func stopForwarding(namespace: String) {
        forwards.withLock { $0.removeValue(forKey: namespace + ".*") }?.value()
        releaseIfIdle()
    }

    /// Notifications named `name` posted on `notificationCenter` (in this process) are posted as
    /// Darwin notifications too, to every process on the bus. A Darwin notification carries only
    /// its name: an `object` or `userInfo` it cannot take goes to `onPayloadDropped` (by default
    /// one line on standard error, once per name), never silently; export through a
    /// ``DistributedNotificationCenter`` (``export(_:through:onError:)``) to carry them. Failures
    /// to post (no bus) go to `onError`, as a Foundation observer has no caller to throw to.
    public func export(_ name: Notification.Name, onError: @escaping @Sendable (NotifyError) -> Void = { _ in },
                       onPayloadDropped: @escaping @Sendable (Notification) -> Void = DarwinNotificationBridge.sayPayloadDropped) {
        let center = center
        setExport(name) { [weak self] note in
            // What this bridge forwarded came from the bus: never send it back.
            if let self, let sender = note.object as AnyObject?, sender === self { return }
            if note.object != nil || note.userInfo?.isEmpty == false { onPayloadDropped(note) }
            do throws(NotifyError) { try center.post(name.rawValue) } catch { onError(error) }
        }
    }

    /// Notifications named `name` posted on `notificationCenter` go out through `distributed` with
    /// their object (a String, or nil) and userInfo, to every process of its scope. A refused one
    /// (no property list, an object that is no String, no bus) goes to `onError`.
    public func export(_ name: Notification.Name, through distributed: DistributedNotificationCenter,
                       onError: @escaping @Sendable (DistributedNotificationError) -> Void = { _ in }) {
        setExport(name) { [weak self] note in
            if let self, let sender = note.object as AnyObject?, sender === self { return }
            do throws(DistributedNotificationError) {
                try distributed.checkedPost(name: name, object: note.object, userInfo: note.userInfo)
            } catch { onError(error) }
        }
    }

    /// Stops exporting `name`.
    public func stopExporting(_ name: Notification.Name) {
        if let token = exports.withLock({ $0.removeValue(forKey: name.rawValue) }) { notificationCenter.removeObserver(token.value) }
        releaseIfIdle()
    }

    private func setExport(_ name: Notification.Name, _ block: @escaping @Sendable (Notification) -> Void) {
        let token = notificationCenter.addObserver(forName: name, object: nil, queue: nil, using: block)
        let previous = exports.withLock { old -> UncheckedTransfer<NSObjectProtocol>? in
            defer { old[name.rawValue] = UncheckedTransfer(token) }
            return old[name.rawValue]
        }
        if let previous { notificationCenter.removeObserver(previous.value) }
        keepAlive()
    }

    /// The default `onPayloadDropped`: one line on standard error per name.
    public static let sayPayloadDropped: @Sendable (Notification) -> Void = { note in
        let first = saidFor.withLock { $0.insert(note.name.rawValue).inserted }
        guard first else { return }
        FileHandle.standardError.write(Data(("DarwinNotificationBridge: \(note.name.rawValue) was exported as a Darwin notification, "
            + "which carries only its name: its object and userInfo were not sent (export it through a "
            + "DistributedNotificationCenter to carry them)\n").utf8))
    }
    private static let saidFor = Mutex<Set<String>>([])

    /// Stops forwarding and exporting everything, and lets the bridge go.
    public func invalidate() {
        stopAll()
        _ = Self.live.withLock { $0.removeValue(forKey: ObjectIdentifier(self)) }
    }

    private func stopAll() {
        let stops = forwards.withLock { old -> [UncheckedTransfer<() -> Void>] in defer { old.removeAll() }; return Array(old.values) }
        for stop in stops { stop.value() }
        let tokens = exports.withLock { old -> [UncheckedTransfer<NSObjectProtocol>] in defer { old.removeAll() }; return Array(old.values) }
        for token in tokens { notificationCenter.removeObserver(token.value) }
    }

    /// Nothing forwarded or exported any more: no reason to keep the bridge alive.
    private func releaseIfIdle() {
        let idle = forwards.withLock { $0.isEmpty } && exports.withLock { $0.isEmpty }
        if idle { _ = Self.live.withLock { $0.removeValue(forKey: ObjectIdentifier(self)) } }
    }
}

/// A weak reference to the bridge for the notifications it forwards (their `object`).

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
        let queue = UncheckedTransfer(self.queue)
        loop.perform { body(queue.value) }
        loop.perform {} // wakes a run loop waiting in its sources
    }
}

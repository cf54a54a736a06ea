// NotifyCenter.swift: the Swift face of a C center: posting, observing, state.
import CNotify
import Dispatch

/// A Darwin-style notification center: name-only notifications shared by every process on a bus.
///
/// `NotifyCenter.default` uses the process-wide C center (`CNotify_center_get_darwin_notify_center`),
/// the same one `notify_post(3)` uses. Its bus is `DARWIN_NOTIFY_BUS` if set, else the embedded bus.
public final class NotifyCenter: Sendable {
    // nonisolated(unsafe): an OpaquePointer is not Sendable, but this one never changes after
    // init and the C center it points to is thread-safe (its own locks; one I/O thread).
    nonisolated(unsafe) let handle: OpaquePointer
    private let ownsHandle: Bool

    /// The executor of the center's delivery thread: a task that prefers it
    /// (`withTaskExecutorPreference`) and awaits a post of this center resumes on the thread that
    /// delivered it (see ``Notifications``).
    public let deliveryExecutor = DeliveryExecutor()

    /// The process-wide center on the default bus.
    public static let `default` = NotifyCenter(handle: CNotify_center_get_darwin_notify_center(), owns: false)

    private init(handle: OpaquePointer, owns: Bool) {
        self.handle = handle
        self.ownsHandle = owns
    }

    /// A center on an explicit bus: a D-Bus address (`unix:path=…`), or `session`, `system`,
    /// `embedded`. Wraps `CNotify_center_create`. The bus is reached on first use.
    /// - Throws: `NotifyError` with `.serverNotFound` for a malformed address.
    public convenience init(bus: String) throws(NotifyError) {
        var status: UInt32 = 0
        guard let handle = CNotify_center_create(bus, &status) else {
            try NotifyError.check(status == 0 ? NotifyError.Code.failed.rawValue : status)
            throw NotifyError(code: .failed, message: "cannot create a center")
        }
        self.init(handle: handle, owns: true)
    }

    deinit {
        if ownsHandle { CNotify_center_destroy(handle) }
    }

    /// The address of the bus in use ("" before first use).
    public var busAddress: String { String(cString: CNotify_center_bus_address(handle)) }

    /// Posts `name` to every observer on the bus, this process included (`CNotify_center_post`).
    public func post(_ name: String) throws(NotifyError) {
        try NotifyError.check(CNotify_center_post(handle, name))
    }

    /// Waits until every post made so far is written to the bus (`CNotify_center_flush`), at
    /// most `timeoutMilliseconds` (a negative value waits until written or disconnected).
    /// - Throws: ``NotifyError/Code/failed`` when the bus took not all of them in time (a
    ///   stopped or overloaded dbus-daemon), ``NotifyError/Code/serverNotFound`` when it went away.
    public func flush(timeoutMilliseconds: Int32 = 5000) throws(NotifyError) {
        try NotifyError.check(CNotify_center_flush(handle, timeoutMilliseconds))
    }

    /// The queue observers use unless they name one: serial, so each poster's order is kept.
    public static let defaultCallbackQueue = DispatchQueue(label: "DarwinNotify.callbacks")

    /// Calls `handler` on `queue` for each post of `name`, until the returned observation is
    /// cancelled or released. On a serial queue, posts arrive in the order each poster made them
    /// (as with Apple's `notify_register_dispatch`; a concurrent queue may run them side by side).
    ///
    /// With `queue: nil` the handler runs on the center's delivery thread, like a C callback
    /// (Foundation's `NotificationCenter` runs a nil-queue block on the posting thread): no thread
    /// hop, in arrival order, one at a time. Keep such a handler short, as every observer of the
    /// center waits for it.
    ///
    /// Cancelling follows <doc:Cancellation>: once `cancel()` returns, the handler does not start
    /// and is not running (unless `cancel()` is called from inside it).
    public func observe(
        _ name: String,
        queue: DispatchQueue? = NotifyCenter.defaultCallbackQueue,
        handler: @escaping @Sendable (String) -> Void
    ) throws(NotifyError) -> NotificationObservation {
        try observation(of: name, isNamespace: false, queue: queue, handler: handler)
    }

    /// The posts of `name` as an async sequence. Ending the iteration cancels the observation.
    public func notifications(named name: String) throws(NotifyError) -> Notifications {
        try notifications(name, isNamespace: false)
    }

    /// Calls `handler` with the full name of every post of `namespace` and of every name under it
    /// (`CNotify_center_add_namespace_handler`): "com.example" matches `com.example` and
    /// `com.example.*`, never `com.examples`. Beyond Apple's API, whose Darwin center needs exact
    /// names. Queue and cancellation as ``observe(_:queue:handler:)``.
    /// - Throws: ``NotifyError/Code/invalidName`` for a namespace D-Bus cannot match on
    ///   (elements of letters, digits, `_` and `-`, none starting with a digit).
    public func observe(
        namespace: String,
        queue: DispatchQueue? = NotifyCenter.defaultCallbackQueue,
        handler: @escaping @Sendable (String) -> Void
    ) throws(NotifyError) -> NotificationObservation {
        try observation(of: namespace, isNamespace: true, queue: queue, handler: handler)
    }

    /// Both `observe` forms: with a queue, each post hops to it through an ``InvocationGate`` (the
    /// cancel contract); without, the C core runs the handler and its remove already waits.
    private func observation(of key: String, isNamespace: Bool, queue: DispatchQueue?,
                             handler: @escaping @Sendable (String) -> Void) throws(NotifyError) -> NotificationObservation {
        guard let queue else { return try register(key, isNamespace: isNamespace, gate: nil, deliver: handler) }
        let gate = InvocationGate()
        return try register(key, isNamespace: isNamespace, gate: gate) { name in
            queue.async { gate.run { handler(name) } }
        }
    }

    /// The posts under `namespace` (see ``observe(namespace:queue:handler:)``) as an async
    /// sequence, each with its full name. Ending the iteration cancels the observation.
    public func notifications(namespace: String) throws(NotifyError) -> Notifications {
        try notifications(namespace, isNamespace: true)
    }

    private func notifications(_ key: String, isNamespace: Bool) throws(NotifyError) -> Notifications {
        let (stream, continuation) = AsyncStream.makeStream(of: DarwinNotification.self)
        let executor = deliveryExecutor
        let observation = try register(key, isNamespace: isNamespace, gate: nil) { name in
            // A task iterating with `executor` preferred resumes here, on this thread.
            executor.run { continuation.yield(DarwinNotification(name: name)) }
        }
        continuation.onTermination = { _ in observation.cancel() }
        return Notifications(stream: stream, observation: observation)
    }

    /// Registers a C handler (`CNotify_center_add_handler` or `_add_namespace_handler`) whose
    /// context is a ``CallbackBox``; a cancelled observation's box delivers nothing more.
    func register(
        _ key: String,
        isNamespace: Bool = false,
        gate: InvocationGate?,
        deliver: @escaping @Sendable (String) -> Void
    ) throws(NotifyError) -> NotificationObservation {
        let state = ObservationState()
        let box = CallbackBox<String> { name in
            if !state.isCancelled { deliver(name) }
        }
        var id: UInt64 = 0
        try box.install { context, release in
            isNamespace
                ? CNotify_center_add_namespace_handler(handle, key, nameTrampoline, context, release, &id)
                : CNotify_center_add_handler(handle, key, nameTrampoline, context, release, &id)
        }
        return NotificationObservation(center: self, id: id, state: state, gate: gate)
    }
}

/// A delivered notification.
public struct DarwinNotification: Sendable, Hashable {
    public let name: String
}

extension NotifyCenter {
    /// The C center (`CNotify_center *`), for code that mixes this API with `CNotify_*` calls.
    public var cCenter: OpaquePointer { handle }
}

/// What a center has seen since it started (`CNotify_center_get_stats`).
public struct NotifyStatistics: Sendable, Equatable {
    /// Post signals that reached this process.
    public let received: UInt64
    /// Observer invocations.
    public let delivered: UInt64
    /// Posts missing from a sender's numbering of a name: dropped by the bus on the way here.
    public let gaps: UInt64
    /// Reconnections after the bus went away.
    public let reconnects: UInt64
    /// Posts of `user.uid.N` names dropped because the bus said the sender was neither N nor root.
    public let rejected: UInt64
}

extension NotifyCenter {
    public var statistics: NotifyStatistics {
        var s = CNotify_stats()
        CNotify_center_get_stats(handle, &s)
        return NotifyStatistics(received: s.received, delivered: s.delivered, gaps: s.gaps, reconnects: s.reconnects,
                                rejected: s.rejected)
    }
}

/// A post as the center delivers it, with what the core knows of who posted it
/// (`CNotify_center_current_post`).
public struct DeliveredPost: Sendable, Hashable {
    public let name: String
    /// This center posted it (its origin, which survives reconnections: docs/PROTOCOL.md "Origins").
    public let fromThisCenter: Bool
    /// The poster's number of this post of `name`, when it sent one.
    public let sequence: UInt64?
}

extension NotifyCenter {
    /// Calls `handler` on the center's delivery thread for every post of `name`, telling whether
    /// this center posted it (a bridge must not deliver its own posts twice). As
    /// ``observe(_:queue:handler:)`` with `queue: nil`.
    public func observePosts(_ name: String,
                             handler: @escaping @Sendable (DeliveredPost) -> Void) throws(NotifyError) -> NotificationObservation {
        try observePosts(key: name, isNamespace: false, handler: handler)
    }

    /// Calls `handler` on the center's delivery thread for every post of `namespace` and of the
    /// names under it, telling whether this center posted it (a bridge must not send its own
    /// posts back). As ``observe(namespace:queue:handler:)`` with `queue: nil`.
    public func observePosts(namespace: String,
                             handler: @escaping @Sendable (DeliveredPost) -> Void) throws(NotifyError) -> NotificationObservation {
        try observePosts(key: namespace, isNamespace: true, handler: handler)
    }

    private func observePosts(key: String, isNamespace: Bool,
                              handler: @escaping @Sendable (DeliveredPost) -> Void) throws(NotifyError) -> NotificationObservation {
        // The C center is safe to use from any thread; the closure only runs while the center
        // lives (its destroy removes every registration first).
        nonisolated(unsafe) let center = handle
        return try register(key, isNamespace: isNamespace, gate: nil) { name in
            // On the delivery thread, inside the C callback: the core describes the post.
            var info = CNotify_post_info()
            let known = CNotify_center_current_post(center, &info) == UInt32(NOTIFY_STATUS_OK)
            handler(DeliveredPost(name: name, fromThisCenter: known && info.from_this_center != 0,
                                  sequence: known && info.has_sequence != 0 ? info.sequence : nil))
        }
    }

    /// The longest name, in bytes of UTF-8 (`CNOTIFY_NAME_MAX`).
    public static let maxNameLength = Int(CNOTIFY_NAME_MAX)

    /// Checks `name` as every call does (1 to 512 bytes of UTF-8).
    public static func validate(name: String) throws(NotifyError) {
        try NotifyError.check(CNotify_validate_name(name))
    }

    /// Checks `namespace` as ``observe(namespace:queue:handler:)`` does.
    public static func validate(namespace: String) throws(NotifyError) {
        try NotifyError.check(CNotify_validate_namespace(namespace))
    }

    /// Whom a `user.uid.N` name belongs to (docs/PROTOCOL.md "Restricted names").
    public enum Restriction: Sendable, Equatable {
        /// Anyone may post it.
        case none
        /// Only uid N (or root) may post or set it.
        case uid(UInt32)
        /// Restricted to a number that is no uid: nobody may.
        case nobody
    }

    public static func restriction(of name: String) -> Restriction {
        var uid: UInt32 = 0
        switch CNotify_name_restricted_uid(name, &uid) {
        case 0: return .none
        case 1: return .uid(uid)
        default: return .nobody
        }
    }

    /// The directory holding the state files of `bus` (nil: the default bus), docs/PROTOCOL.md
    /// "State files": the one in use, which may be a `.XXXXXX` beside a squatted name.
    public static func stateDirectory(bus: String?) throws(NotifyError) -> String {
        var buffer = [CChar](repeating: 0, count: 4096)
        try NotifyError.check(CNotify_state_directory(bus, &buffer, buffer.count))
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The bucket interface a post of `name` travels on (docs/PROTOCOL.md "The bucket interface").
    public static func bucketInterface(of name: String) -> String {
        var buffer = [CChar](repeating: 0, count: 32)
        CNotify_bucket_interface(name, &buffer)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The file name of `name`'s state (two FNV-1a 64-bit hashes, docs/PROTOCOL.md): also a
    /// stable 128-bit digest of any string.
    public static func stateFileName(of name: String) -> String {
        var buffer = [CChar](repeating: 0, count: 33)
        CNotify_state_file_name(name, &buffer)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

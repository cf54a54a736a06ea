import CNotify
import Dispatch

/// A Darwin-style notification center: name-only notifications shared by every process on a bus.
///
/// `NotifyCenter.default` uses the process-wide C center (`CNotify_center_get_darwin_notify_center`),
/// the same one `notify_post(3)` uses. Its bus is `DARWIN_NOTIFY_BUS` if set, else the embedded bus.
public final class NotifyCenter: @unchecked Sendable {
    // @unchecked Sendable: the only state is the C center handle, and the C center is thread-safe
    // (its own locks; one I/O thread owns the connection). The handle never changes after init.
    let handle: OpaquePointer
    private let ownsHandle: Bool

    /// The process-wide center on the default bus.
    public static let `default` = NotifyCenter(handle: CNotify_center_get_darwin_notify_center(), owns: false)

    private init(handle: OpaquePointer, owns: Bool) {
        self.handle = handle
        self.ownsHandle = owns
    }

    /// A center on an explicit bus: a D-Bus address (`unix:path=…`), or `session`, `system`,
    /// `embedded`. Wraps `CNotify_center_create`. The bus is reached on first use.
    /// - Throws: `NotifyError` with `.serverNotFound` for a malformed address.
    public convenience init(bus: String) throws {
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
    public func post(_ name: String) throws {
        try NotifyError.check(CNotify_center_post(handle, name))
    }

    /// Waits until every post made so far is written to the bus (`CNotify_center_flush`).
    public func flush(timeoutMilliseconds: Int32 = 5000) throws {
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
    /// Once `cancel()` returns no new invocation starts; one already running finishes.
    public func observe(
        _ name: String,
        queue: DispatchQueue? = NotifyCenter.defaultCallbackQueue,
        handler: @escaping @Sendable (String) -> Void
    ) throws -> NotificationObservation {
        let state = ObservationState()
        guard let queue else { return try register(name, state: state, deliver: handler) }
        return try register(name, state: state) { name in
            queue.async {
                if !state.isCancelled { handler(name) }
            }
        }
    }

    /// The posts of `name` as an async sequence. Ending the iteration cancels the observation.
    public func notifications(named name: String) throws -> Notifications {
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
    ) throws -> NotificationObservation {
        let state = ObservationState()
        guard let queue else { return try register(namespace, isNamespace: true, state: state, deliver: handler) }
        return try register(namespace, isNamespace: true, state: state) { name in
            queue.async {
                if !state.isCancelled { handler(name) }
            }
        }
    }

    /// The posts under `namespace` (see ``observe(namespace:queue:handler:)``) as an async
    /// sequence, each with its full name. Ending the iteration cancels the observation.
    public func notifications(namespace: String) throws -> Notifications {
        try notifications(namespace, isNamespace: true)
    }

    private func notifications(_ key: String, isNamespace: Bool) throws -> Notifications {
        let (stream, continuation) = AsyncStream.makeStream(of: DarwinNotification.self)
        let observation = try register(key, isNamespace: isNamespace, state: ObservationState()) { name in
            continuation.yield(DarwinNotification(name: name))
        }
        continuation.onTermination = { _ in observation.cancel() }
        return Notifications(stream: stream, observation: observation)
    }

    /// Registers a C handler whose context is a retained `HandlerBox`, released by the C core
    /// (`CNotify_release`) once no invocation can still be running.
    func register(
        _ name: String,
        isNamespace: Bool = false,
        state: ObservationState,
        deliver: @escaping @Sendable (String) -> Void
    ) throws -> NotificationObservation {
        let box = Unmanaged.passRetained(HandlerBox(state: state, deliver: deliver))
        var id: UInt64 = 0
        let handler: CNotify_handler = { context, name in
            guard let context, let name else { return }
            let box = Unmanaged<HandlerBox>.fromOpaque(context).takeUnretainedValue()
            if !box.state.isCancelled { box.deliver(String(cString: name)) }
        }
        let release: CNotify_release = { context in
            guard let context else { return }
            Unmanaged<HandlerBox>.fromOpaque(context).release()
        }
        let status = isNamespace
            ? CNotify_center_add_namespace_handler(handle, name, handler, box.toOpaque(), release, &id)
            : CNotify_center_add_handler(handle, name, handler, box.toOpaque(), release, &id)
        if status != 0 {
            // A failed registration leaves the context with us (the C core's contract).
            box.release()
            try NotifyError.check(status)
        }
        return NotificationObservation(center: self, id: id, state: state)
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

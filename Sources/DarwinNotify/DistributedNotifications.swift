// DistributedNotifications.swift: distributed notifications (a name, an object string and a
// property-list userInfo; docs/PROTOCOL.md "Distributed notifications") without Foundation: the
// one Swift wrapper of CNotify_distributed_add_handler and CNotify_distributed_post, which
// DistributedNotificationCenter, the distnotify tool and notify-bridge all use.
import CNotify
import Synchronization

/// A distributed notification as a center delivers it to a ``DistributedObservation``'s handler.
///
/// Its strings are Swift's own; ``userInfo`` and ``withUnsafeNote(_:)`` read the C core's copy,
/// which lives until the handler returns: read them inside the handler, never later.
public struct DistributedNote {
    /// The notification's name.
    public let name: String
    /// Its object string, if the poster gave one.
    public let object: String?
    /// The posting connection's unique name on the bus, if known.
    public let sender: String?
    /// The poster's number of this post of ``name`` (docs/PROTOCOL.md, "Origins").
    public let sequence: UInt64
    /// Whether the poster asked for delivery even to suspended observers (Apple's
    /// `deliverImmediately`).
    public let deliverImmediately: Bool
    /// Whether this very center posted it.
    public let isFromThisCenter: Bool
    private let note: UnsafePointer<CNotify_distributed_note>

    init(_ note: UnsafePointer<CNotify_distributed_note>) {
        let n = note.pointee
        self.note = note
        name = String(cString: n.name)
        object = n.object.map { String(cString: $0) }
        sender = n.sender.map { String(cString: $0) }
        sequence = n.sequence
        deliverImmediately = n.options & UInt32(CNOTIFY_DISTRIBUTED_DELIVER_IMMEDIATELY) != 0
        isFromThisCenter = n.from_this_center != 0
    }

    /// The userInfo read into Swift values (`nil`: the poster sent none); valid inside the handler only.
    public var userInfo: PropertyListValue? { note.pointee.user_info.map(PropertyListValue.init) }

    /// Calls `body` with the C core's note (`CNotify_distributed_note`), for C-level work such as
    /// marshalling it; the pointer is valid inside the handler only, and only during `body`.
    /// - Parameter body: what to do with the note; its result is returned.
    public func withUnsafeNote<Result>(_ body: (UnsafePointer<CNotify_distributed_note>) throws -> Result) rethrows -> Result {
        try body(note)
    }
}

/// A live observation of distributed notifications. Cancel it, or let it go: releasing it cancels.
public final class DistributedObservation: Sendable {
    private let center: NotifyCenter
    private let id: UInt64
    private let cancelled = Atomic<Bool>(false)

    init(center: NotifyCenter, id: UInt64) {
        self.center = center
        self.id = id
    }

    /// The C core's registration id.
    public var registrationID: UInt64 { id }

    /// Stops deliveries (`CNotify_distributed_remove_handler`): once it returns the handler does
    /// not start, and one running on another thread has ended. Safe to call more than once.
    public func cancel() {
        guard !cancelled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        CNotify_distributed_remove_handler(center.cCenter, id)
    }

    deinit { cancel() }
}

extension NotifyCenter {
    /// Calls `handler` with each distributed notification of `name` (`nil`: every name) whose
    /// object is `object` (`nil`: any), on the center's delivery thread, one at a time
    /// (`CNotify_distributed_add_handler`). The note is valid during the call only.
    /// - Parameters:
    ///   - name: the name to observe, or `nil` for every name.
    ///   - object: the object string to match, or `nil` for any.
    ///   - handler: called with each notification.
    /// - Returns: the observation; releasing it cancels.
    /// - Throws: ``NotifyError/Code/invalidName`` for a name that is not valid.
    public func observeDistributed(
        _ name: String?,
        object: String? = nil,
        handler: @escaping @Sendable (DistributedNote) -> Void
    ) throws(NotifyError) -> DistributedObservation {
        let box = CallbackBox<DistributedNote>(handler)
        var id: UInt64 = 0
        try box.install { context, release in
            CNotify_distributed_add_handler(cCenter, name, object, { context, note in
                guard let context, let note else { return }
                CallbackBox<DistributedNote>.from(context).invoke(DistributedNote(note))
            }, context, release, &id)
        }
        return DistributedObservation(center: self, id: id)
    }

    /// Posts a distributed notification (`CNotify_distributed_post`) with a userInfo the caller
    /// already holds as a C property list (a dictionary, or `nil`: none), which stays the caller's.
    /// - Parameters:
    ///   - name: the notification's name.
    ///   - object: its object string, or `nil`.
    ///   - userInfo: a `CNotify_plist` dictionary, or `nil`.
    ///   - deliverImmediately: deliver even to suspended observers.
    /// - Throws: the C core's status as a ``NotifyError``.
    public func postDistributed(_ name: String, object: String? = nil, cUserInfo userInfo: OpaquePointer?,
                                deliverImmediately: Bool = false) throws(NotifyError) {
        let options = deliverImmediately ? UInt32(CNOTIFY_DISTRIBUTED_DELIVER_IMMEDIATELY) : 0
        try NotifyError.check(CNotify_distributed_post(cCenter, name, object, userInfo, options))
    }

    /// Posts a distributed notification whose userInfo is Swift values: a
    /// ``PropertyListValue/dictionary(_:)``, or `nil` for none.
    /// - Parameters:
    ///   - name: the notification's name.
    ///   - object: its object string, or `nil`.
    ///   - userInfo: a dictionary, or `nil`.
    ///   - deliverImmediately: deliver even to suspended observers.
    /// - Throws: ``NotifyError/Code/invalidRequest`` for a userInfo that is not a dictionary or
    ///   is past the property-list bounds; else the C core's status.
    public func postDistributed(_ name: String, object: String? = nil, userInfo: PropertyListValue? = nil,
                                deliverImmediately: Bool = false) throws(NotifyError) {
        guard let userInfo else {
            return try postDistributed(name, object: object, cUserInfo: nil, deliverImmediately: deliverImmediately)
        }
        guard case .dictionary = userInfo else { throw NotifyError(code: .invalidRequest, message: "a userInfo is a dictionary") }
        let plist = try userInfo.makeCPropertyList()
        defer { CNotify_plist_free(plist) }
        try postDistributed(name, object: object, cUserInfo: plist, deliverImmediately: deliverImmediately)
    }
}

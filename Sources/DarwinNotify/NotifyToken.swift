// NotifyToken.swift: notify(3) tokens, and the center's factories for each kind.
import CNotify
import Dispatch
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A notify(3) token: the registration kinds of Apple's API, on a center's bus. Wraps
/// `CNotify_center_register_*`, and `notify_check`, `notify_suspend`, `notify_resume`,
/// `notify_get_state`, `notify_set_state` and `notify_cancel` on the token.
///
/// Cancel it explicitly, or let it go: releasing it cancels. A token keeps its center alive: the
/// C core cancels the tokens of a destroyed center, so a token must not outlive it.
public final class NotifyToken: Sendable {
    /// How posts reach the token.
    public enum Kind: Sendable, Equatable {
        /// Only counted: poll with `check()`.
        case check
        /// Each post writes the token number to `fileDescriptor` (4 bytes, network order).
        case fileDescriptor
        /// Each post raises this signal in the process.
        case signal(Int32)
        /// Each post runs a closure on a dispatch queue.
        case dispatch
    }

    /// The notify(3) token number.
    public let rawValue: Int32
    public let name: String
    public let kind: Kind
    /// The pipe to watch (`.fileDescriptor` tokens): readable after a post. Use it with
    /// `DispatchSource.makeReadSource` or poll(2), then `readPosts()`.
    public let fileDescriptor: Int32?
    private let cancelled = Atomic<Bool>(false)
    private let gate: InvocationGate?
    /// The center the token was registered on, held until the token goes.
    private let center: NotifyCenter

    fileprivate init(rawValue: Int32, name: String, kind: Kind, center: NotifyCenter, fileDescriptor: Int32? = nil,
                 gate: InvocationGate? = nil) {
        self.center = center
        self.rawValue = rawValue
        self.name = name
        self.kind = kind
        self.fileDescriptor = fileDescriptor
        self.gate = gate
    }

    deinit { cancel() }

    /// Stops the registration (`notify_cancel`). A dispatch token follows <doc:Cancellation>:
    /// once this returns, its closure does not start and is not running, unless called from
    /// inside it. Safe to call more than once.
    public func cancel() {
        guard !cancelled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        // As NotificationObservation.cancel: the core first (no post is queued after it), then the
        // gate (one queued or running is dropped or waited out).
        _ = notify_cancel(rawValue)
        gate?.close()
    }

    public var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    /// Whether the name was posted since the last check (`notify_check`; true on the first call).
    public func check() throws(NotifyError) -> Bool {
        var posted: Int32 = 0
        try NotifyError.check(notify_check(rawValue, &posted))
        return posted != 0
    }

    /// Holds posts until `resume()`; they then coalesce into one delivery (`notify_suspend`).
    /// Suspensions nest.
    public func suspend() throws(NotifyError) { try NotifyError.check(notify_suspend(rawValue)) }

    /// Ends one `suspend()`; after the last, one delivery follows if any post arrived
    /// (`notify_resume`). A token that is not suspended is left as it is, with no error, as on
    /// Apple platforms.
    public func resume() throws(NotifyError) { try NotifyError.check(notify_resume(rawValue)) }

    /// The name's 64-bit state on the bus (`notify_get_state`): no round trip.
    public func state() throws(NotifyError) -> UInt64 {
        var value: UInt64 = 0
        try NotifyError.check(notify_get_state(rawValue, &value))
        return value
    }

    /// Sets the name's state for every process on the bus (`notify_set_state`). Throws
    /// `.notAuthorized` for someone else's `user.uid.N` name.
    public func setState(_ value: UInt64) throws(NotifyError) { try NotifyError.check(notify_set_state(rawValue, value)) }

    /// The token numbers waiting in `fileDescriptor`, without blocking: one per post.
    public func readPosts() throws(NotifyError) -> [Int32] {
        guard let fd = fileDescriptor else {
            throw NotifyError(code: .invalidRequest, message: "token \(rawValue) is not a file-descriptor registration")
        }
        var tokens: [Int32] = []
        var pending: Int32 = 0
        guard ioctl(fd, UInt(FIONREAD), &pending) == 0 else {
            throw NotifyError(code: .failed, message: "FIONREAD on descriptor \(fd): errno \(errno)")
        }
        var word: UInt32 = 0
        for _ in 0 ..< Int(pending) / 4 where read(fd, &word, 4) == 4 {
            tokens.append(Int32(bitPattern: UInt32(bigEndian: word)))
        }
        return tokens
    }
}

extension NotifyCenter {
    /// A token that only counts posts (`notify_register_check`); poll it with ``NotifyToken/check()``.
    public func checkingToken(_ name: String) throws(NotifyError) -> NotifyToken {
        var token: Int32 = 0
        try NotifyError.check(CNotify_center_register_check(handle, name, &token))
        return NotifyToken(rawValue: token, name: name, kind: .check, center: self)
    }

    /// A token whose posts are written to a pipe (`notify_register_file_descriptor`).
    public func fileDescriptorToken(_ name: String) throws(NotifyError) -> NotifyToken {
        var token: Int32 = 0, fd: Int32 = -1
        try NotifyError.check(CNotify_center_register_file_descriptor(handle, name, &fd, 0, &token))
        return NotifyToken(rawValue: token, name: name, kind: .fileDescriptor, center: self, fileDescriptor: fd)
    }

    /// A token whose posts raise `signal` in this process (`notify_register_signal`). Throws
    /// `.invalidSignal` for a number that is not a signal.
    public func signalToken(_ name: String, signal: Int32) throws(NotifyError) -> NotifyToken {
        var token: Int32 = 0
        try NotifyError.check(CNotify_center_register_signal(handle, name, signal, &token))
        return NotifyToken(rawValue: token, name: name, kind: .signal(signal), center: self)
    }

    /// A token whose posts run `handler` with the token number on `queue`
    /// (`notify_register_dispatch`'s semantics; `CNotify_center_register_handler`). Cancelling
    /// follows <doc:Cancellation>.
    public func dispatchToken(_ name: String, queue: DispatchQueue,
                              handler: @escaping @Sendable (Int32) -> Void) throws(NotifyError) -> NotifyToken {
        let gate = InvocationGate()
        let box = CallbackBox<Int32> { token in
            queue.async { gate.run { handler(token) } }
        }
        var token: Int32 = 0
        try box.install { context, release in
            CNotify_center_register_handler(handle, name, tokenTrampoline, context, release, &token)
        }
        return NotifyToken(rawValue: token, name: name, kind: .dispatch, center: self, gate: gate)
    }

    /// The 64-bit state of `name` on this center's bus (`CNotify_center_get_state`); 0 if never set.
    public func state(of name: String) throws(NotifyError) -> UInt64 {
        var value: UInt64 = 0
        try NotifyError.check(CNotify_center_get_state(handle, name, &value))
        return value
    }

    /// Sets the state of `name` for every process on the bus (`CNotify_center_set_state`).
    public func setState(_ value: UInt64, for name: String) throws(NotifyError) {
        try NotifyError.check(CNotify_center_set_state(handle, name, value))
    }
}

extension NotifyCenter {
    /// The old name of ``checkingToken(_:)``.
    @available(*, deprecated, renamed: "checkingToken(_:)")
    public func checkToken(_ name: String) throws(NotifyError) -> NotifyToken { try checkingToken(name) }
}

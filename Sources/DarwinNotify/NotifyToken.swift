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

    private init(rawValue: Int32, name: String, kind: Kind, center: NotifyCenter, fileDescriptor: Int32? = nil,
                 gate: InvocationGate? = nil) {
        self.center = center
        self.rawValue = rawValue
        self.name = name
        self.kind = kind
        self.fileDescriptor = fileDescriptor
        self.gate = gate
    }

    deinit { cancel() }

    /// Stops the registration (`notify_cancel`). For a dispatch token, no closure starts after
    /// this returns, and one running on another thread is waited for; the closure itself may
    /// cancel its token. Safe to call more than once.
    public func cancel() {
        guard !cancelled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        gate?.close()
        _ = notify_cancel(rawValue)
    }

    public var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    /// Whether the name was posted since the last check (`notify_check`; true on the first call).
    public func check() throws -> Bool {
        var posted: Int32 = 0
        try NotifyError.check(notify_check(rawValue, &posted))
        return posted != 0
    }

    /// Holds posts until `resume()`; they then coalesce into one delivery (`notify_suspend`).
    /// Suspensions nest.
    public func suspend() throws { try NotifyError.check(notify_suspend(rawValue)) }

    /// Ends one `suspend()`; after the last, one delivery follows if any post arrived
    /// (`notify_resume`). Throws `.invalidRequest` if the token is not suspended.
    public func resume() throws { try NotifyError.check(notify_resume(rawValue)) }

    /// The name's 64-bit state on the bus (`notify_get_state`): no round trip.
    public func state() throws -> UInt64 {
        var value: UInt64 = 0
        try NotifyError.check(notify_get_state(rawValue, &value))
        return value
    }

    /// Sets the name's state for every process on the bus (`notify_set_state`). Throws
    /// `.notAuthorized` for someone else's `user.uid.N` name.
    public func setState(_ value: UInt64) throws { try NotifyError.check(notify_set_state(rawValue, value)) }

    /// The token numbers waiting in `fileDescriptor`, without blocking: one per post.
    public func readPosts() throws -> [Int32] {
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
    /// A token that only counts posts (`notify_register_check`).
    public func checkToken(_ name: String) throws -> NotifyToken {
        var token: Int32 = 0
        try NotifyError.check(CNotify_center_register_check(handle, name, &token))
        return NotifyToken.make(token, name, .check, on: self)
    }

    /// A token whose posts are written to a pipe (`notify_register_file_descriptor`).
    public func fileDescriptorToken(_ name: String) throws -> NotifyToken {
        var token: Int32 = 0, fd: Int32 = -1
        try NotifyError.check(CNotify_center_register_file_descriptor(handle, name, &fd, 0, &token))
        return NotifyToken.make(token, name, .fileDescriptor, on: self, fileDescriptor: fd)
    }

    /// A token whose posts raise `signal` in this process (`notify_register_signal`). Throws
    /// `.invalidSignal` for a number that is not a signal.
    public func signalToken(_ name: String, signal: Int32) throws -> NotifyToken {
        var token: Int32 = 0
        try NotifyError.check(CNotify_center_register_signal(handle, name, signal, &token))
        return NotifyToken.make(token, name, .signal(signal), on: self)
    }

    /// A token whose posts run `handler` with the token number on `queue`
    /// (`notify_register_dispatch`'s semantics).
    public func dispatchToken(_ name: String, queue: DispatchQueue,
                              handler: @escaping @Sendable (Int32) -> Void) throws -> NotifyToken {
        let gate = InvocationGate()
        let box = Unmanaged.passRetained(TokenHandlerBox { token in
            queue.async { gate.run { handler(token) } }
        })
        var token: Int32 = 0
        let status = CNotify_center_register_handler(handle, name, { context, token in
            guard let context else { return }
            Unmanaged<TokenHandlerBox>.fromOpaque(context).takeUnretainedValue().deliver(token)
        }, box.toOpaque(), { context in
            guard let context else { return }
            Unmanaged<TokenHandlerBox>.fromOpaque(context).release()
        }, &token)
        if status != 0 {
            box.release() // a failed registration leaves the context with us
            try NotifyError.check(status)
        }
        return NotifyToken.make(token, name, .dispatch, on: self, gate: gate)
    }

    /// The 64-bit state of `name` on this center's bus (`CNotify_center_get_state`); 0 if never set.
    public func state(of name: String) throws -> UInt64 {
        var value: UInt64 = 0
        try NotifyError.check(CNotify_center_get_state(handle, name, &value))
        return value
    }

    /// Sets the state of `name` for every process on the bus (`CNotify_center_set_state`).
    public func setState(_ value: UInt64, for name: String) throws {
        try NotifyError.check(CNotify_center_set_state(handle, name, value))
    }
}

extension NotifyToken {
    fileprivate static func make(_ token: Int32, _ name: String, _ kind: Kind, on center: NotifyCenter,
                                 fileDescriptor: Int32? = nil, gate: InvocationGate? = nil) -> NotifyToken {
        NotifyToken(rawValue: token, name: name, kind: kind, center: center, fileDescriptor: fileDescriptor, gate: gate)
    }
}

/// The C core's context for a dispatch token: called on the delivery thread.
final class TokenHandlerBox: Sendable {
    let deliver: @Sendable (Int32) -> Void
    init(_ deliver: @escaping @Sendable (Int32) -> Void) { self.deliver = deliver }
}

/// Keeps a dispatch token's closure from starting after cancel, and makes cancel wait for one
/// running on another thread (not for one on the cancelling thread: a closure may cancel its
/// own token).
final class InvocationGate: @unchecked Sendable {
    // @unchecked Sendable: every field is read and written with `mutex` held; the mutex and
    // condition live in allocated memory, so their addresses never move.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let idle = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var closed = false
    private var runners: [pthread_t] = []

    init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(idle, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        pthread_cond_destroy(idle)
        mutex.deallocate()
        idle.deallocate()
    }

    func run(_ body: () -> Void) {
        pthread_mutex_lock(mutex)
        guard !closed else { pthread_mutex_unlock(mutex); return }
        runners.append(pthread_self())
        pthread_mutex_unlock(mutex)
        body()
        pthread_mutex_lock(mutex)
        if let i = runners.firstIndex(where: { pthread_equal($0, pthread_self()) != 0 }) { runners.remove(at: i) }
        pthread_cond_broadcast(idle)
        pthread_mutex_unlock(mutex)
    }

    func close() {
        pthread_mutex_lock(mutex)
        closed = true
        while runners.contains(where: { pthread_equal($0, pthread_self()) == 0 }) {
            pthread_cond_wait(idle, mutex)
        }
        pthread_mutex_unlock(mutex)
    }
}

// CallbackRegistration.swift: how a Swift closure becomes a C registration's context.
import CNotify

/// A closure the C core holds as a registration's `context` (GRDB's `DatabaseFunction` pattern):
/// passed retained, released by the C core's `CNotify_release` once no invocation can still be
/// running, or by us if the registration failed (the C core's contract: a failed registration
/// leaves the context with the caller).
package final class CallbackBox<Argument>: Sendable {
    package let invoke: @Sendable (Argument) -> Void
    /// Runs when the C core lets the box go (its registration cancelled), on that thread.
    private let released: (@Sendable () -> Void)?
    package init(_ invoke: @escaping @Sendable (Argument) -> Void, released: (@Sendable () -> Void)? = nil) {
        self.invoke = invoke
        self.released = released
    }
    deinit { released?() }

    /// The box behind a context pointer the C core hands back to a callback.
    package static func from(_ context: UnsafeMutableRawPointer) -> CallbackBox<Argument> {
        Unmanaged<CallbackBox<Argument>>.fromOpaque(context).takeUnretainedValue()
    }

    /// Registers with `register(context, release)`, which wraps one `CNotify_*` call and returns
    /// its status; the C core owns the box from then on.
    package func install(_ register: (_ context: UnsafeMutableRawPointer, _ release: CNotify_release) -> UInt32) throws(NotifyError) {
        let context = Unmanaged.passRetained(self)
        let status = register(context.toOpaque(), { context in
            // Any class's release: the box's type does not matter to the retain count.
            if let context { Unmanaged<AnyObject>.fromOpaque(context).release() }
        })
        if status != UInt32(NOTIFY_STATUS_OK) {
            context.release()
            try NotifyError.check(status)
        }
    }
}

/// The C side of every name registration (`CNotify_handler`): one trampoline for the whole package,
/// which hands the name to the registration's ``CallbackBox``.
package let nameTrampoline: CNotify_handler = { context, name in
    guard let context, let name else { return }
    CallbackBox<String>.from(context).invoke(String(cString: name))
}

/// The C side of every token registration (`CNotify_token_handler`), as ``nameTrampoline``.
package let tokenTrampoline: CNotify_token_handler = { context, token in
    guard let context else { return }
    CallbackBox<Int32>.from(context).invoke(token)
}

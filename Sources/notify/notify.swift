// notify.swift: Apple's Swift module for <notify.h>. `import notify` brings notify(3) (the C
// functions, their status codes and the NOTIFY_* options), <notify_keys.h> and Dispatch, and
// notify_register_dispatch with the signature Swift code on Apple platforms calls: a
// `DispatchQueue` and an `(Int32) -> Void` handler.
@_exported import CNotify
@_exported import Dispatch
import DarwinNotify

/// Apple's `notify_handler_t` as Swift sees it: the handler gets the token.
public typealias notify_handler_t = (Int32) -> Void

/// notify(3)'s `notify_register_dispatch` with Apple's Swift signature: `handler` runs
/// asynchronously on `queue` with the token, once per post of `name`, until `notify_cancel(token)`.
/// Once `notify_cancel` returns, the handler does not start again (a run already going on another
/// thread is waited for; not one that called `notify_cancel` itself).
///
/// Returns what the C function returns for the same input: `NOTIFY_STATUS_NULL_INPUT` for a nil
/// token pointer, queue or handler, `NOTIFY_STATUS_INVALID_NAME` for a name notify(3) refuses, and
/// the bus's failure otherwise (`notify_register_dispatch(3)`).
public func notify_register_dispatch(_ name: UnsafePointer<CChar>!, _ out_token: UnsafeMutablePointer<Int32>!,
                                     _ queue: DispatchQueue!, _ handler: notify_handler_t!) -> UInt32 {
    // Libnotify's order: the queue and the handler, then the name, then out_token.
    guard let queue, let handler else { return UInt32(NOTIFY_STATUS_NULL_INPUT) }
    let nameStatus = CNotify_validate_name(name)
    guard nameStatus == UInt32(NOTIFY_STATUS_OK) else { return nameStatus }
    guard let out_token else { return UInt32(NOTIFY_STATUS_NULL_INPUT) }
    let gate = InvocationGate()
    let run = DispatchRun(handler)
    // The C core lets the box go when the token is cancelled (notify_cancel): the gate closes then.
    let box = CallbackBox<Int32>({ token in
        queue.async { gate.run { run.handler(token) } }
    }, released: { gate.close() })
    var token: Int32 = 0
    do throws(NotifyError) {
        try box.install { context, release in
            CNotify_center_register_handler(nil, name, tokenTrampoline, context, release, &token)
        }
    } catch {
        return error.code.rawValue
    }
    out_token.pointee = token
    return UInt32(NOTIFY_STATUS_OK)
}

/// The caller's handler, run only on its queue through the gate. Apple's handler is a block with no
/// Sendable promise; notify(3) calls it on the queue the caller chose, as this does.
private final class DispatchRun: @unchecked Sendable {
    // @unchecked Sendable: set once; called only on the caller's queue.
    let handler: notify_handler_t
    init(_ handler: @escaping notify_handler_t) { self.handler = handler }
}

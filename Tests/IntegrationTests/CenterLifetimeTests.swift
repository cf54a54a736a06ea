import CNotify
import DarwinNotify
import Dispatch
import Foundation
import Testing

/// A center destroyed from one of its own callbacks (what a binding does when the last reference
/// to a center goes away inside a handler) is freed by its I/O thread, not under it.
extension IntegrationSuites {
    @Suite("Center lifetime", .serialized)
    struct CenterLifetimeTests {
        let bus: TestBus
        init() throws { bus = try TestBus() }

        final class Context: @unchecked Sendable {
            // @unchecked Sendable: `center` and `id` are written before the handler can run and
            // only read afterwards; `released` is a semaphore.
            var center: OpaquePointer?
            var id: UInt64 = 0
            let released = DispatchSemaphore(value: 0)
        }

        @Test("destroy from inside a callback: the I/O thread frees the center after it returns")
        func destroyFromOwnCallback() throws {
            var status: UInt32 = 0
            let center = try #require(CNotify_center_create(bus.address, &status))
            let context = Context()
            context.center = center
            let raw = Unmanaged.passRetained(context).toOpaque()
            let handler: CNotify_handler = { ctx, _ in
                let context = Unmanaged<Context>.fromOpaque(ctx!).takeUnretainedValue()
                _ = CNotify_center_remove_handler(context.center, context.id) // itself, from inside
            }
            let release: CNotify_release = { ctx in
                let context = Unmanaged<Context>.fromOpaque(ctx!).takeRetainedValue()
                CNotify_center_destroy(context.center) // runs on the center's own I/O thread
                context.released.signal()
            }
            #expect(CNotify_center_add_handler(center, "lifetime.x", handler, raw, release, &context.id) == 0)
            #expect(CNotify_center_post(center, "lifetime.x") == 0)
            #expect(context.released.wait(timeout: .now() + 20) == .success)
            // The process is still sound: another center on the same bus works end to end.
            let other = try NotifyCenter(bus: bus.address)
            let arrived = DispatchSemaphore(value: 0)
            let observation = try other.observe("lifetime.after") { _ in arrived.signal() }
            try other.post("lifetime.after")
            #expect(arrived.wait(timeout: .now() + 20) == .success)
            observation.cancel()
        }
    }
}

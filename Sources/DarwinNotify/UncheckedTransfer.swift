// UncheckedTransfer.swift: the package's one way to hand across threads what Swift cannot prove
// safe to hand (as swift-nio's UnsafeTransfer), and its one weak reference that does the same.
// Package-only: not Swift API. Every use says, where it is made, why the value is safe there.

/// A value handed across threads that Swift cannot prove safe: a Notification made on the delivery
/// thread and read only on the queue's thread afterwards, an observer token only passed back to
/// `removeObserver`, a C pointer read only inside the callback that made it.
package struct UncheckedTransfer<Value>: @unchecked Sendable {
    package let value: Value
    package init(_ value: Value) { self.value = value }
}

/// A weak reference that crosses threads: set once, read only to call into the object (which is
/// thread-safe itself), so that a callback does not keep its owner alive.
package final class WeakTransfer<Object: AnyObject>: @unchecked Sendable {
    package private(set) weak var value: Object?
    package init(_ value: Object) { self.value = value }
}

// WormholeListener.swift: the public faces of delivery: a listener's token and an async sequence.
import DarwinNotify
import Dispatch

/// A listener's token (`Wormhole.listen`). Keep it: cancelling or releasing it stops the listener.
public final class WormholeListener: Sendable {
    private let delivery: MessageDelivery

    init(source: any MessageSource, placement: DeliveryPlacement,
         handler: @escaping @Sendable (Result<WormholeMessage, WormholeError>) -> Void) {
        delivery = MessageDelivery(source: source, placement: placement, handler: handler)
    }

    func start(center: NotifyCenter, name: String) throws(WormholeError) {
        try delivery.start(center: center, name: name)
    }

    /// Stops the listener (MMWormhole `stopListeningForMessageWithIdentifier:`, for this listener
    /// only), as DarwinNotify's "Cancellation" article says: once it returns, the handler does
    /// not start and is not running, unless called from inside it. A named queue listener then
    /// releases its name.
    public func cancel() { delivery.cancel() }

    public var isCancelled: Bool { delivery.isCancelled }

    /// Cancels, then waits until a named queue listener's cursor is saved and its name released.
    /// Never call it from the handler.
    public func cancelAndWait() { delivery.cancelAndWait() }

    deinit { delivery.cancel() }
}

/// The messages of an identifier as an async sequence (`Wormhole.messages(for:)`). Damaged or lost
/// messages arrive as failures and the sequence goes on. Ending the iteration (or `cancel()`)
/// stops listening.
public struct WormholeMessages: AsyncSequence, Sendable {
    public typealias Element = Result<WormholeMessage, WormholeError>
    let delivery: MessageDelivery

    public struct AsyncIterator: AsyncIteratorProtocol {
        let delivery: MessageDelivery
        public mutating func next() async -> Element? { await delivery.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(delivery: delivery) }

    public func cancel() { delivery.cancel() }
}

import DarwinNotify
import DarwinNotifyFoundation
import Foundation
import Synchronization
import Testing

/// Darwin notifications through Foundation's NotificationCenter (issue 13, part 4): code written
/// for `addObserver(forName:object:queue:using:)` and NotificationQueue keeps working across
/// processes.
extension IntegrationSuites {
    @Suite("Foundation bridge", .serialized)
    struct FoundationBridgeTests {
        let bus: TestBus
        init() throws { bus = try TestBus() }

        @Test("a Darwin post from another process reaches an OperationQueue observer; an exported name leaves, and never loops")
        func forwardAndExport() throws {
            let center = try NotifyCenter(bus: bus.address)
            let foundation = NotificationCenter()
            let bridge = DarwinNotificationBridge(center: center, notificationCenter: foundation)
            let name = Notification.Name("com.example.bridged")
            try bridge.forward(name)
            bridge.export(name)
            let received = Mutex(0), fromBridge = Mutex(false)
            let operations = OperationQueue()
            let token = foundation.addObserver(forName: name, object: nil, queue: operations) { note in
                received.withLock { $0 += 1 }
                if (note.object as AnyObject?) === bridge { fromBridge.withLock { $0 = true } }
            }
            defer { foundation.removeObserver(token) }
            // Another process counts every post of the name on the bus.
            let outside = try ChildProcess("cnotify-probe", ["stats", "com.example.bridged", "bridge.sentinel"],
                                           environment: bus.environment, stdin: true)
            try outside.waitForLine("ready")
            try notifyutilPost(["com.example.bridged"], bus: bus)
            try repeatUntil("the Foundation observer", action: {}, done: { received.withLock { $0 } == 1 })
            #expect(fromBridge.withLock { $0 })
            // In-process Foundation posts go out to the bus.
            foundation.post(name: name, object: nil)
            try notifyutilPost(["bridge.sentinel"], bus: bus)
            try outside.waitForLine { $0.hasPrefix("bridge.sentinel") }
            // The outside process saw the original and the export: 2, not a third (no loop back).
            #expect(outside.lines.filter { $0.hasPrefix("com.example.bridged") }.count == 2, "\(outside.lines)")
            outside.closeStdin()
            _ = try outside.waitForExit()
            bridge.invalidate()
        }

        @Test("NotificationQueue .onName/.whenIdle coalesces ten posts from another process into one")
        func coalescing() throws {
            let center = try NotifyCenter(bus: bus.address)
            let foundation = NotificationCenter()
            let name = Notification.Name("com.example.coalesced")
            let delivered = Mutex(0)
            let token = foundation.addObserver(forName: name, object: nil, queue: nil) { _ in delivered.withLock { $0 += 1 } }
            defer { foundation.removeObserver(token) }
            // A thread with a run loop, the NotificationQueue's home.
            let ready = DispatchSemaphore(value: 0), stop = Atomic(false)
            let target = Mutex<EnqueueTarget?>(nil), loop = Mutex<UncheckedLoop?>(nil)
            let thread = Thread {
                target.withLock { $0 = EnqueueTarget(notificationCenter: foundation) }
                loop.withLock { $0 = UncheckedLoop(RunLoop.current) }
                RunLoop.current.add(Timer(timeInterval: 3600, repeats: true) { _ in }, forMode: .default) // keeps it running
                ready.signal()
                while !stop.load(ordering: .relaxed) { _ = RunLoop.current.run(mode: .default, before: Date(timeIntervalSinceNow: 0.1)) }
            }
            thread.start()
            ready.wait()
            defer { stop.store(true, ordering: .relaxed) }
            let bridge = DarwinNotificationBridge(center: center, notificationCenter: foundation)
            try bridge.forward(name, delivery: .enqueue(target.withLock { $0! }, style: .whenIdle, coalesce: .onName))
            // Hold the run loop while ten posts arrive, as a busy app would be.
            let gate = DispatchSemaphore(value: 0)
            loop.withLock { $0! }.loop.perform { gate.wait() }
            let arrived = Mutex(0)
            let counter = try center.observe(name.rawValue, queue: nil) { _ in arrived.withLock { $0 += 1 } }
            try notifyutilPost(Array(repeating: name.rawValue, count: 10), bus: bus)
            try repeatUntil("ten posts on the bus", action: {}, done: { arrived.withLock { $0 } == 10 })
            gate.signal()
            try repeatUntil("the coalesced notification", action: {}, done: { delivered.withLock { $0 } >= 1 })
            // A later post, once idle, is delivered on its own.
            try notifyutilPost([name.rawValue], bus: bus)
            try repeatUntil("the eleventh post", action: {}, done: { arrived.withLock { $0 } == 11 })
            try repeatUntil("its delivery", action: {}, done: { delivered.withLock { $0 } >= 2 })
            #expect(delivered.withLock { $0 } == 2, "ten posts while busy coalesced into one, then one more")
            counter.cancel()
            bridge.invalidate()
        }
    }
}

/// A run loop handed to the test's thread. @unchecked Sendable: only `perform` is called on it
/// from elsewhere, which RunLoop allows from any thread.
final class UncheckedLoop: @unchecked Sendable {
    let loop: RunLoop
    init(_ loop: RunLoop) { self.loop = loop }
}

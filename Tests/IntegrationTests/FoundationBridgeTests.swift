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

        /// The names a Foundation observer saw, with whether the bridge was their object.
        final class Seen: Sendable {
            let notes = Mutex<[String]>([])
            func add(_ n: Notification, bridge: AnyObject?) {
                let from = (n.object as AnyObject?) === bridge ? "bridge" : (n.object as? String ?? "-")
                let info = (n.userInfo?["k"] as? String).map { " k=\($0)" } ?? ""
                notes.withLock { $0.append("\(n.name.rawValue)/\(from)\(info)") }
            }
            var all: [String] { notes.withLock { $0 } }
        }

        @Test("a name both forwarded and exported is delivered once in this process, not again from the bus")
        func noDuplicateLocalDelivery() throws {
            let center = try NotifyCenter(bus: bus.address)
            let foundation = NotificationCenter()
            let bridge = DarwinNotificationBridge(center: center, notificationCenter: foundation)
            defer { bridge.invalidate() }
            let name = Notification.Name("com.example.both")
            try bridge.forward(name)
            bridge.export(name)
            let seen = Seen()
            let token = foundation.addObserver(forName: nil, object: nil, queue: nil) { seen.add($0, bridge: bridge) }
            defer { foundation.removeObserver(token) }
            // Our export goes out and comes back to our own center: the bridge must not post it again.
            let sentinelSeen = Mutex(false)
            let marker = try center.observe("bridge.sentinel2", queue: nil) { _ in sentinelSeen.withLock { $0 = true } }
            defer { marker.cancel() }
            foundation.post(name: name, object: nil)
            try center.post("bridge.sentinel2") // after the export on the same connection: it came back first
            try repeatUntil("our own sentinel back from the bus", action: {}, done: { sentinelSeen.withLock { $0 } })
            #expect(seen.all == ["com.example.both/-"], "\(seen.all)")
            // Another process's post of the name is still forwarded.
            try notifyutilPost([name.rawValue], bus: bus)
            try repeatUntil("the other process's post", action: {}, done: { seen.all.count == 2 })
            #expect(seen.all.last == "com.example.both/bridge")
        }

        @Test("an exported post's object and userInfo are reported as not carried, never dropped silently; through a distributed center they travel")
        func payloads() throws {
            let center = try NotifyCenter(bus: bus.address)
            let foundation = NotificationCenter()
            let bridge = DarwinNotificationBridge(center: center, notificationCenter: foundation)
            defer { bridge.invalidate() }
            let dropped = Mutex<[String]>([])
            bridge.export(Notification.Name("com.example.darwin"), onPayloadDropped: { note in
                dropped.withLock { $0.append(note.name.rawValue) }
            })
            let outside = try ChildProcess("cnotify-probe", ["stats", "com.example.darwin", "bridge.sentinel"],
                                           environment: bus.environment, stdin: true)
            try outside.waitForLine("ready")
            foundation.post(name: Notification.Name("com.example.darwin"), object: nil, userInfo: ["k": "v"])
            try notifyutilPost(["bridge.sentinel"], bus: bus)
            try outside.waitForLine { $0.hasPrefix("bridge.sentinel") }
            #expect(outside.lines.filter { $0.hasPrefix("com.example.darwin") }.count == 1, "the name still went out")
            #expect(dropped.withLock { $0 } == ["com.example.darwin"], "and the bridge said its userInfo did not")
            outside.closeStdin()
            _ = try outside.waitForExit()

            // Through a DistributedNotificationCenter the object and userInfo go out, and come in.
            let distributed = try DistributedNotificationCenter(bus: bus.address)
            let carried = Notification.Name("com.example.carried")
            bridge.export(carried, through: distributed)
            try bridge.forward(carried, from: distributed)
            let seen = Seen()
            let token = foundation.addObserver(forName: carried, object: nil, queue: nil) { seen.add($0, bridge: bridge) }
            defer { foundation.removeObserver(token) }
            let watcher = try ChildProcess("distnotify", ["watch", "--bus", bus.address, "--json", "--count", "1", carried.rawValue])
            try watcher.waitForStderr("distnotify: watching")
            foundation.post(name: carried, object: "prefs", userInfo: ["k": "local"])
            #expect(try watcher.waitForExit() == 0)
            #expect(watcher.stdout.hasPrefix(#"{"name":"com.example.carried","object":"prefs","userInfo":{"k":"local"}"#), "\(watcher.stdout)")
            let posted = try run("distnotify", ["post", "--bus", bus.address, carried.rawValue, "--object", "other", "-u", #"{"k":"remote"}"#])
            #expect(posted.status == 0, "\(posted.err)")
            try repeatUntil("the other process's distributed post", action: {}, done: { seen.all.count == 2 })
            #expect(seen.all == ["com.example.carried/prefs k=local", "com.example.carried/other k=remote"],
                    "the local post once (not again from the bus), then the other process's with its payload: \(seen.all)")
        }

        @Test("namespace forwarding, stopping one name, and a bridge nobody keeps works until invalidated")
        func namespacesStopAndLifetime() throws {
            let center = try NotifyCenter(bus: bus.address)
            let foundation = NotificationCenter()
            let seen = Seen()
            let token = foundation.addObserver(forName: nil, object: nil, queue: nil) { seen.add($0, bridge: nil) }
            defer { foundation.removeObserver(token) }
            weak var weakBridge: DarwinNotificationBridge?
            do {
                let bridge = DarwinNotificationBridge(center: center, notificationCenter: foundation)
                try bridge.forward(namespace: "com.example.ns")
                try bridge.forward(Notification.Name("com.example.one"))
                try bridge.forward(Notification.Name("com.example.two"))
                weakBridge = bridge
            } // not kept by the test: the bridge keeps itself while it forwards
            #expect(weakBridge != nil)
            weakBridge?.stopForwarding(Notification.Name("com.example.one"))
            try notifyutilPost(["com.example.ns.a", "com.example.nsx", "com.example.one", "com.example.two", "com.example.ns"], bus: bus)
            try repeatUntil("the forwarded posts", action: {}, done: { seen.all.count == 3 })
            #expect(seen.all.map { $0.components(separatedBy: "/")[0] } == ["com.example.ns.a", "com.example.two", "com.example.ns"],
                    "\(seen.all)")
            weakBridge?.invalidate()
            #expect(weakBridge == nil, "invalidate lets it go")
        }
    }
}

/// A run loop handed to the test's thread. @unchecked Sendable: only `perform` is called on it
/// from elsewhere, which RunLoop allows from any thread.
final class UncheckedLoop: @unchecked Sendable {
    let loop: RunLoop
    init(_ loop: RunLoop) { self.loop = loop }
}

import DarwinNotify
import Dispatch
import Foundation
import Synchronization
import Testing

/// The bus routes each post only to processes observing its name (one exact rule per name on the
/// name's bucket interface, docs/DESIGN.md).
extension IntegrationSuites {
    @Suite("Routing by name", .serialized)
    struct RoutingTests {
        let bus: TestBus
        let center: NotifyCenter
        init() throws {
            bus = try TestBus()
            center = try NotifyCenter(bus: bus.address)
        }

        /// Observes `name` until `count` posts arrived, while `act` runs.
        private func receive(_ name: String, count: Int = 1, act: () throws -> Void) throws {
            let arrived = DispatchSemaphore(value: 0)
            let observation = try center.observe(name) { _ in arrived.signal() }
            defer { observation.cancel() }
            try act()
            for _ in 0..<count { #expect(arrived.wait(timeout: .now() + 20) == .success, "\(name) did not arrive") }
        }

        @Test("a process receives nothing for names it does not observe")
        func onlyObservedNamesArrive() throws {
            let before = center.statistics.received
            // One poster, in order: 50 names we do not observe, then the one we do. The bus keeps
            // a poster's order, so when the last arrives the others would have arrived before it.
            try receive("routing.observed") {
                try notifyutilPost((0..<50).map { "routing.other.\($0)" } + ["routing.observed"], bus: bus)
            }
            #expect(center.statistics.received - before == 1)
        }

        @Test("once the last observer of a name goes, its posts stop reaching the process")
        func ruleGoesWithLastObserver() throws {
            try receive("routing.temporary") { try notifyutilPost(["routing.temporary"], bus: bus) }
            let before = center.statistics.received
            try receive("routing.sentinel") {
                try notifyutilPost(Array(repeating: "routing.temporary", count: 5) + ["routing.sentinel"], bus: bus)
            }
            #expect(center.statistics.received - before == 1)
        }

        @Test("names needing quoting, or too long for an exact rule, are still delivered", arguments: [
            "it's",
            "quote'''s,and=commas",
            String(repeating: "'", count: 300),  // escaped rule over the bus's 1024-byte limit
            String(repeating: "é", count: 256),  // 512 bytes of UTF-8
        ])
        func awkwardNames(name: String) throws {
            try receive(name) { try center.post(name) }
        }

        @Test("a post on the plain interface (a foreign poster) reaches observers")
        func plainInterface() throws {
            try receive("routing.plain") {
                let r = try run("/usr/bin/dbus-send", ["--bus=\(bus.address)", "--type=signal", "/org/darwinnotify",
                                                       "org.darwinnotify.Notify.Post", "string:routing.plain"])
                #expect(r.status == 0, "\(r.err)")
            }
        }

        @Test("every post is numbered, and none went missing")
        func numbering() throws {
            try receive("routing.numbered", count: 20) {
                try notifyutilPost(Array(repeating: "routing.numbered", count: 20), bus: bus)
            }
            #expect(center.statistics.gaps == 0)
        }

        @Test("two threads registering the same new name: neither returns before the bus has the rule")
        func concurrentFirstRegistration() throws {
            let poster = try NotifyCenter(bus: bus.address) // another connection
            // Hold the delivery thread inside a callback: no AddMatch reply can be dispatched now.
            let entered = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
            let blocker = try center.observe("routing.block", queue: nil) { _ in entered.signal(); release.wait() }
            try poster.post("routing.block")
            #expect(entered.wait(timeout: .now() + 20) == .success)
            let returned = Atomic<Int>(0)
            let observations = Mutex<[NotificationObservation]>([])
            let arrived = Mutex(0)
            let group = DispatchGroup()
            for _ in 0..<2 {
                group.enter()
                Thread {
                    defer { group.leave() }
                    guard let o = try? center.observe("routing.pending", queue: nil, handler: { _ in arrived.withLock { $0 += 1 } })
                    else { return }
                    returned.add(1, ordering: .relaxed)
                    observations.withLock { $0.append(o) }
                }.start()
            }
            // One thread sent the AddMatch and waits for its reply; the other must wait for it too.
            // Nothing signals "did not return", so this is a bounded look (an early return takes µs).
            _ = group.wait(timeout: .now() + 0.3)
            #expect(returned.load(ordering: .relaxed) == 0, "a registration returned before the bus had its rule")
            release.signal()
            #expect(group.wait(timeout: .now() + 20) == .success)
            #expect(returned.load(ordering: .relaxed) == 2)
            try poster.post("routing.pending")
            try repeatUntil(timeout: 20, interval: 0.01, "the post to reach both observers", action: {},
                            done: { arrived.withLock { $0 } == 2 })
            observations.withLock { $0.forEach { $0.cancel() } }
            blocker.cancel()
        }
    
        @Test("past the bus's 512-rule limit, one catch-all rule takes over: the 1,000th name is delivered, also after a restart")
        func ruleLimitFallback() throws {
            // TestBus's config keeps dbus-daemon's default of 512 match rules per connection.
            let names = (0..<1000).map { "limit.name.\($0)" }
            let observer = try ChildProcess("cnotify-probe", ["observe", "2"] + names, environment: bus.environment)
            try observer.waitForLine("ready")
            try notifyutilPost(["limit.name.999"], bus: bus)
            try observer.waitForLine("limit.name.999")
            try bus.restart()
            try repeatUntil("the 1,000th name after the restart", action: { try notifyutilPost(["limit.name.998"], bus: bus) },
                            done: { observer.lines.contains("limit.name.998") })
            #expect(try observer.waitForExit() == 0, "\(observer.stderr)")
        }
}
}

import DarwinNotify
import Dispatch
import Foundation
import Synchronization
import Testing
import Wormhole

/// What `wormhole-probe flood` passes: writer and index.
private struct FloodTick: Decodable, Sendable { var w: Int; var i: Int }

/// Wormhole messages between real processes on a private bus.
extension IntegrationSuites {
    @Suite("Wormhole delivery", .serialized)
    struct WormholeDeliveryTests {
        let fixture: WormholeFixture
        init() throws { fixture = try WormholeFixture() }

        @Test("a message passed by one process reaches listeners in two others, in order")
        func passToTwoListeners() throws {
            let listeners = try (0..<2).map { _ in
                try fixture.listener(["listen", "group.test", "greeting", "--count", "3"])
            }
            for n in 1...3 {
                try fixture.cliOK(["pass", "group.test", "greeting", "{\"n\":\(n),\"text\":\"hi \(n)\"}"])
                // File transiting keeps the latest message only: wait for each before the next.
                for listener in listeners { try listener.waitForLines(n) }
            }
            for listener in listeners {
                #expect(try listener.waitForExit() == 0)
                #expect(listener.lines == (1...3).map { "{\"n\":\($0),\"text\":\"hi \($0)\"}" })
            }
            #expect(try fixture.cliOK(["read", "group.test", "greeting"]) == "{\"n\":3,\"text\":\"hi 3\"}\n")
        }

        @Test("several listeners in one process fire once each per message, even when it is announced again")
        func listenersFireOnce() throws {
            let wormhole = try fixture.wormhole()
            let got = Mutex<[[Int]]>(Array(repeating: [], count: 3))
            let arrived = DispatchSemaphore(value: 0)
            let listeners = try (0..<3).map { index in
                try wormhole.listen(for: "ping", as: Int.self) { result in
                    guard case .success(let value) = result else { return }
                    got.withLock { $0[index].append(value) }
                    arrived.signal()
                }
            }
            for n in 1...5 {
                try fixture.cliOK(["pass", "group.test", "ping", "\(n)"])
                for _ in 0..<3 { #expect(arrived.wait(timeout: .now() + 20) == .success) }
                // The same message announced twice more by a stranger: nobody fires again.
                try notifyutilPost([wormhole.notificationName(for: "ping"), wormhole.notificationName(for: "ping")], bus: fixture.bus)
            }
            try fixture.cliOK(["pass", "group.test", "ping", "6"])
            for _ in 0..<3 { #expect(arrived.wait(timeout: .now() + 20) == .success) }
            #expect(got.withLock { $0 } == Array(repeating: [1, 2, 3, 4, 5, 6], count: 3))
            listeners.forEach { $0.cancelAndWait() }
        }

        @Test("a cancelled listener stops while the others go on")
        func cancelOneListener() throws {
            let wormhole = try fixture.wormhole()
            let first = Mutex<[Int]>([]), second = Mutex<[Int]>([])
            let arrived = DispatchSemaphore(value: 0)
            let a = try wormhole.listen(for: "n", as: Int.self) { if case .success(let v) = $0 { first.withLock { $0.append(v) }; arrived.signal() } }
            let b = try wormhole.listen(for: "n", as: Int.self) { if case .success(let v) = $0 { second.withLock { $0.append(v) }; arrived.signal() } }
            try fixture.cliOK(["pass", "group.test", "n", "1"])
            for _ in 0..<2 { #expect(arrived.wait(timeout: .now() + 20) == .success) }
            a.cancelAndWait()
            try fixture.cliOK(["pass", "group.test", "n", "2"])
            #expect(arrived.wait(timeout: .now() + 20) == .success)
            #expect(first.withLock { $0 } == [1])
            #expect(second.withLock { $0 } == [1, 2])
            b.cancelAndWait()
        }

        @Test("the async sequence yields messages passed by another process")
        func asyncSequence() async throws {
            let wormhole = try fixture.wormhole()
            let messages = try wormhole.messages(for: "stream")
            let fixture = self.fixture
            let passer = Task.detached {
                for n in 1...3 {
                    try fixture.cliOK(["--transiting", "file", "pass", "group.test", "stream", "{\"n\":\(n)}"])
                }
            }
            struct N: Decodable, Equatable { let n: Int }
            var seen: [Int] = []
            for await result in messages {
                seen.append(try result.get().decode(N.self).n)
                // File transiting may skip an intermediate message when passes outrun the reader;
                // the last one always arrives.
                if seen.last == 3 { break }
            }
            try await passer.value
            #expect(seen.last == 3)
            #expect(seen == seen.sorted() && Set(seen).count == seen.count)
            messages.cancel()
        }

        @Test("Codable messages round-trip through the CLI: pass in Swift, read in another process")
        func codableThroughCLI() throws {
            struct Settings: Codable, Equatable { var theme: String; var size: Int }
            let wormhole = try fixture.wormhole()
            try wormhole.pass(Settings(theme: "dark", size: 3), identifier: "settings")
            let line = try fixture.cliOK(["read", "group.test", "settings"])
            let decoded = try JSONDecoder().decode(Settings.self, from: Data(line.utf8))
            #expect(decoded == Settings(theme: "dark", size: 3))
            try fixture.cliOK(["pass", "group.test", "settings", "{\"theme\":\"light\",\"size\":5}"])
            #expect(try wormhole.message("settings", as: Settings.self) == Settings(theme: "light", size: 5))
            #expect(try fixture.cliOK(["list", "group.test"]) == "settings\n")
            try fixture.cliOK(["clear", "group.test", "settings"])
            #expect(try wormhole.message("settings") == nil)
            let missing = try fixture.cli(["read", "group.test", "settings"])
            #expect(missing.status != 0 && missing.err.contains("no message"))
        }

        @Test("clear-all removes every identifier; JSON comes from stdin when omitted")
        func clearAllAndStdin() throws {
            for id in ["a", "b", "c"] { try fixture.cliOK(["pass", "group.test", id, "true"]) }
            let piped = try ChildProcess("wormhole", ["pass", "group.test", "d"], environment: fixture.environment, stdin: true)
            try piped.write("{\"from\": \"stdin\"}\n")
            piped.closeStdin()
            #expect(try piped.waitForExit() == 0)
            #expect(try fixture.cliOK(["read", "group.test", "d"]) == "{\"from\": \"stdin\"}\n")
            #expect(try fixture.cliOK(["list", "group.test"]) == "a\nb\nc\nd\n")
            try fixture.cliOK(["clear-all", "group.test"])
            #expect(try fixture.cliOK(["list", "group.test"]) == "")
        }

        @Test("coordinated updates from two processes lose nothing: 2 × 1,000 increments = 2,000")
        func coordinatedIncrements() throws {
            let writers = try (0..<2).map { _ in
                try ChildProcess("wormhole-probe", ["increment", "group.test", "counter", "1000"], environment: fixture.environment)
            }
            for writer in writers {
                #expect(try writer.waitForExit(timeout: 120) == 0, "\(writer.stderr)")
            }
            let out = try fixture.cliOK(["--transiting", "coordinated", "read", "group.test", "counter"])
            #expect(out == "{\"count\":2000}\n")
        }

        @Test("a listener with queue: nil runs on the center's delivery thread, as an observer with queue: nil does; one on its own queue does not")
        func listenerOnTheDeliveryThread() throws {
            let wormhole = try fixture.wormhole()
            let threads = Mutex<[String: UInt]>([:])
            let arrived = DispatchSemaphore(value: 0)
            let record = { @Sendable (key: String) in
                threads.withLock { $0[key] = UInt(pthread_self()) }
                arrived.signal()
            }
            let observation = try fixture.center.observe("test.delivery-thread", queue: nil) { _ in record("observer") }
            let here = try wormhole.listen(for: "here", queue: nil) { result in
                if case .success = result { record("queue: nil") }
            }
            let own = try wormhole.listen(for: "here") { result in
                if case .success = result { record("own queue") }
            }
            try fixture.cliOK(["pass", "group.test", "here", "1"])
            try notifyutilPost(["test.delivery-thread"], bus: fixture.bus)
            for _ in 0..<3 { #expect(arrived.wait(timeout: .now() + 20) == .success) }
            let seen = threads.withLock { $0 }
            #expect(seen["queue: nil"] != nil && seen["queue: nil"] == seen["observer"], "\(seen)")
            #expect(seen["own queue"] != nil && seen["own queue"] != seen["observer"], "\(seen)")
            here.cancelAndWait()
            own.cancelAndWait()
            observation.cancel()
        }

        @Test("a named queue listener with queue: nil gets what waited and what comes while it reads, each writer's in order, one handler at a time; cancelAndWait from its handler returns, and the next listener of the name starts after the last handled")
        func queueListenerOnTheDeliveryThread() throws {
            let queue = try fixture.wormhole(transiting: .queue)
            try queue.listen(for: "jobs", name: "reader") { _ in }.cancelAndWait()
            let waiting = try ChildProcess("wormhole-probe", ["flood", "group.test", "jobs", "1", "300"], environment: fixture.environment)
            #expect(try waiting.waitForExit(timeout: 60) == 0, "\(waiting.stderr)")
            let got = Mutex<[FloodTick]>([])
            let running = Atomic<Int>(0), overlapped = Atomic<Bool>(false)
            let token = Mutex<WormholeListener?>(nil)
            let done = DispatchSemaphore(value: 0)
            let listener = try queue.listen(for: "jobs", as: FloodTick.self, name: "reader", queue: nil) { result in
                if running.add(1, ordering: .relaxed).newValue > 1 { overlapped.store(true, ordering: .relaxed) }
                defer { running.subtract(1, ordering: .relaxed) }
                guard case .success(let tick) = result else { Issue.record("\(result)"); return }
                if got.withLock({ $0.append(tick); return $0.count }) == 600 {
                    token.withLock { $0 }?.cancelAndWait()
                    done.signal()
                }
            }
            token.withLock { $0 = listener }
            let more = try ChildProcess("wormhole-probe", ["flood", "group.test", "jobs", "2", "300"], environment: fixture.environment)
            #expect(try more.waitForExit(timeout: 60) == 0, "\(more.stderr)")
            #expect(done.wait(timeout: .now() + 60) == .success)
            listener.cancelAndWait()
            let ticks = got.withLock { $0 }
            let overlaps = overlapped.load(ordering: .relaxed)
            #expect(!overlaps)
            #expect(ticks.filter { $0.w == 1 }.map(\.i) == Array(0..<300))
            #expect(ticks.filter { $0.w == 2 }.map(\.i) == Array(0..<300))
            // The cursor was saved: the name's next listener gets only what is passed after.
            let next = DispatchSemaphore(value: 0)
            let firstAfter = Mutex<FloodTick?>(nil)
            let again = try queue.listen(for: "jobs", as: FloodTick.self, name: "reader", queue: nil) { result in
                if case .success(let tick) = result { firstAfter.withLock { $0 = $0 ?? tick }; next.signal() }
            }
            let last = try ChildProcess("wormhole-probe", ["flood", "group.test", "jobs", "3", "1"], environment: fixture.environment)
            #expect(try last.waitForExit(timeout: 60) == 0, "\(last.stderr)")
            #expect(next.wait(timeout: .now() + 20) == .success)
            again.cancelAndWait()
            #expect(firstAfter.withLock { $0.map { [$0.w, $0.i] } } == [3, 0])
        }

        @Test("a named queue listener with queue: nil cancelled from another thread mid-flood: no handler runs after cancelAndWait returns, and the name's next listener goes on from the last message handled")
        func queueListenerOnTheDeliveryThreadCancelledMidFlood() throws {
            let queue = try fixture.wormhole(transiting: .queue)
            try queue.listen(for: "jobs", name: "reader") { _ in }.cancelAndWait()
            let handled = Mutex<[Int]>([]), afterCancel = Atomic<Int>(0), cancelled = Atomic<Bool>(false)
            let hundred = DispatchSemaphore(value: 0)
            let listener = try queue.listen(for: "jobs", as: FloodTick.self, name: "reader", queue: nil) { result in
                if cancelled.load(ordering: .acquiring) { afterCancel.add(1, ordering: .relaxed) }
                guard case .success(let tick) = result else { Issue.record("\(result)"); return }
                if handled.withLock({ $0.append(tick.i); return $0.count }) == 100 { hundred.signal() }
            }
            let flood = try ChildProcess("wormhole-probe", ["flood", "group.test", "jobs", "1", "2000"], environment: fixture.environment)
            #expect(hundred.wait(timeout: .now() + 60) == .success)
            listener.cancelAndWait()
            cancelled.store(true, ordering: .releasing)
            #expect(try flood.waitForExit(timeout: 60) == 0, "\(flood.stderr)")
            let stray = afterCancel.load(ordering: .relaxed)
            #expect(stray == 0)
            let first = handled.withLock { $0 }
            #expect(first == Array(0..<first.count))
            // The next listener of the name: from the last one handled (at least once), to the end.
            let rest = Mutex<[Int]>([])
            let all = DispatchSemaphore(value: 0)
            let again = try queue.listen(for: "jobs", as: FloodTick.self, name: "reader", queue: nil) { result in
                guard case .success(let tick) = result else { Issue.record("\(result)"); return }
                if rest.withLock({ $0.append(tick.i); return $0.last }) == 1999 { all.signal() }
            }
            #expect(all.wait(timeout: .now() + 60) == .success)
            again.cancelAndWait()
            let second = rest.withLock { $0 }
            #expect(second.first.map { $0 <= first.count && $0 >= first.count - 1 } == true, "first \(first.count) handled, then from \(second.first ?? -1)")
            #expect(second == Array((second.first ?? 0)...1999))
        }

        @Test("two groups using the same identifier never hear each other's announcements")
        func groupsAreNamespaced() throws {
            let other = try fixture.wormhole("group.other")
            let heard = Mutex(0)
            let arrived = DispatchSemaphore(value: 0)
            let observation = try fixture.center.observe(other.notificationName(for: "shared"), queue: nil) { _ in
                heard.withLock { $0 += 1 }
                arrived.signal()
            }
            try fixture.cliOK(["pass", "group.test", "shared", "\"for test\""])
            try fixture.cliOK(["pass", "group.other", "shared", "\"for other\""])
            #expect(arrived.wait(timeout: .now() + 20) == .success)
            try fixture.center.flush()
            try fixture.cliOK(["pass", "group.other", "shared", "\"again\""])
            #expect(arrived.wait(timeout: .now() + 20) == .success)
            #expect(heard.withLock { $0 } == 2)
            #expect(try other.message("shared", as: String.self) == "again")
            observation.cancel()
        }
    }
}

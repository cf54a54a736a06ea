import DarwinNotify
import Dispatch
import Foundation
import Synchronization
import Testing

/// The bus goes away and comes back on the same address.
extension IntegrationSuites {
    @Suite("Bus restart", .serialized)
    struct RestartTests {
        let bus: TestBus
        init() throws { bus = try TestBus() }

        @Test("observers in another process receive again within 1 s of the bus returning")
        func observersSurviveRestart() throws {
            let observer = try ChildProcess("cnotify-probe", ["observe", "2", "restart.x"], environment: bus.environment)
            try observer.waitForLine("ready")
            try notifyutilPost(["restart.x"], bus: bus)
            try observer.waitForLine(timeout: 20) { $0 == "restart.x" }

            try bus.kill()
            let down = try run("notifyutil", ["-p", "restart.x"], environment: bus.environment)
            #expect(down.status != 0)
            #expect(down.err.contains("Server Not Found"), "stderr: \(down.err)")

            try bus.start()
            let back = Date()
            try repeatUntil(timeout: 20, interval: 0.05, "the observer to receive after the restart", action: {
                _ = try run("notifyutil", ["-p", "restart.x"], environment: bus.environment)
            }, done: { !observer.isRunning })
            let elapsed = Date().timeIntervalSince(back)
            #expect(try observer.waitForExit() == 0)
            // The contract of the issue: reconnect and receive within 1 s, with no call from the user.
            #expect(elapsed < 1.0, "first delivery came \(elapsed) s after the bus returned")
        }

        @Test("a center's numbering goes on across a bus restart: its origin owns it, not its connection")
        func numberingSurvivesRestart() throws {
            let center = try NotifyCenter(bus: bus.address)
            try center.post("seq.keep")
            try center.post("seq.keep")
            try bus.kill()
            try bus.start()
            var posted = false
            try repeatUntil(timeout: 20, interval: 0.02, "the center to post again after the restart", action: {
                posted = (try? center.post("seq.back")) != nil
            }, done: { posted })
            let monitor = try ChildProcess("notifyutil", ["--monitor", "--json"], environment: bus.environment)
            defer { monitor.kill() }
            try repeatUntil("the monitor to see a sentinel", action: {
                try notifyutilPost(["seq.sentinel"], bus: bus)
            }, done: { monitor.stdout.contains("seq.sentinel") })
            try center.post("seq.keep")
            let line = try monitor.waitForLine(timeout: 20) { $0.contains("\"seq.keep\"") }
            // The third post of the name by this center: 3, not 1 as on a fresh connection.
            #expect(line.contains("\"seq\":3"), "\(line)")
        }

        @Test("while the bus is down the Swift API throws serverNotFound; afterwards it posts again")
        func swiftAPIThrowsWhileDown() throws {
            let center = try NotifyCenter(bus: bus.address)
            try center.post("swift.down")
            try bus.kill()
            var caught: NotifyError?
            try repeatUntil(timeout: 20, interval: 0.02, "post to fail while the bus is down", action: {
                do throws(NotifyError) { try center.post("swift.down") } catch { caught = error }
            }, done: { caught != nil })
            #expect(caught?.code == .serverNotFound)
            try bus.start()
            var posted = false
            try repeatUntil(timeout: 20, interval: 0.02, "post to succeed after the restart", action: {
                posted = (try? center.post("swift.down")) != nil
            }, done: { posted })
        }

        @Test("posting and registering from several threads while the bus dies and returns: no crash, no hang")
        func concurrentUseAcrossRestarts() throws {
            let center = try NotifyCenter(bus: bus.address)
            let stop = Atomic<Bool>(false)
            let posts = Atomic<Int>(0), registrations = Atomic<Int>(0)
            let group = DispatchGroup()
            for worker in 0..<4 {
                // Dedicated threads: busy loops on the global queue would take both of its threads.
                group.enter()
                Thread {
                    defer { group.leave() }
                    var i = 0
                    while !stop.load(ordering: .relaxed) {
                        if worker % 2 == 0 {
                            if (try? center.post("stress.\(worker).\(i % 7)")) != nil { posts.add(1, ordering: .relaxed) }
                        } else {
                            do {
                                let o = try center.observe("stress.\(worker).\(i % 5)", queue: nil, handler: { _ in })
                                registrations.add(1, ordering: .relaxed)
                                o.cancel()
                            } catch {
                                // Expected while the bus is down: registrations fail or wait.
                            }
                        }
                        i += 1
                    }
                }.start()
            }
            for _ in 0..<2 {
                usleep(150_000) // let the workers run against a live bus; this is load, not synchronisation
                try bus.restart()
            }
            usleep(150_000)
            stop.store(true, ordering: .relaxed)
            #expect(group.wait(timeout: .now() + 30) == .success, "workers hung")
            #expect(posts.load(ordering: .relaxed) > 0)
            #expect(registrations.load(ordering: .relaxed) > 0)
            // And the center still works end to end.
            let arrived = Atomic<Bool>(false)
            let observation = try center.observe("stress.after", queue: nil) { _ in arrived.store(true, ordering: .releasing) }
            try repeatUntil(timeout: 20, interval: 0.05, "a post after the restarts to arrive", action: {
                _ = try? center.post("stress.after")
            }, done: { arrived.load(ordering: .acquiring) })
            observation.cancel()
        }
    }
}

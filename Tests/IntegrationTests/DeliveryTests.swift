import Foundation
import Testing

/// Delivery semantics across real processes on a private dbus-daemon.
extension IntegrationSuites {
    @Suite("Delivery between processes", .serialized)
    struct DeliveryTests {
        let bus: TestBus
        init() throws { bus = try TestBus() }

        @Test("two observing processes each receive every post of one poster")
        func twoObserversOnePoster() throws {
            let observers = try (0..<2).map { _ in try ChildProcess("cnotify-probe", ["observe", "3", "multi.x"], environment: bus.environment) }
            for o in observers { try o.waitForLine("ready") }
            try notifyutilPost(["multi.x", "multi.x", "multi.x"], bus: bus)
            for o in observers {
                #expect(try o.waitForExit() == 0)
                #expect(o.lines == ["ready", "multi.x", "multi.x", "multi.x"])
            }
        }

        @Test("one post arriving twice (same origin, name and sequence, by two connections) is delivered once")
        func duplicateByOriginDeliveredOnce() throws {
            let observer = try ChildProcess("cnotify-probe", ["observe", "5", "dup.x", "dup.end"], environment: bus.environment)
            try observer.waitForLine("ready")
            let origin = "1311768467294899696" // 0x1234567890abcdf0
            func send(_ args: [String]) throws {
                let r = try run("/usr/bin/dbus-send", ["--bus=\(bus.address)", "--type=signal", "/org/darwinnotify",
                                                       "\(bucketInterface("dup.x")).Post", "string:dup.x"] + args)
                #expect(r.status == 0, "\(r.err)")
            }
            try send(["uint64:5", "uint64:\(origin)"])
            try send(["uint64:5", "uint64:\(origin)"]) // the same post again, from another connection: dropped
            try send(["uint64:6", "uint64:\(origin)"])
            try send(["uint64:5"])                      // no origin: keyed by its sender, delivered
            try send(["uint64:5", "string:not-an-origin"]) // not an origin: as none, delivered
            try notifyutilPost(["dup.end"], bus: bus) // the fifth delivery, if the duplicate was dropped
            #expect(try observer.waitForExit() == 0)
            #expect(observer.lines == ["ready", "dup.x", "dup.x", "dup.x", "dup.x", "dup.end"], "\(observer.lines)")
        }

        @Test("a burst the socket could not take at once arrives in full with no later post and no flush")
        func burstBacklogIsWrittenByTheIOThread() throws {
            let sink = try ChildProcess("cnotify-probe", ["bench-sink", "backlog.x"], environment: bus.environment)
            try sink.waitForLine("ready")
            // 20,000 posts overrun the socket's buffer; the poster then stays alive without posting
            // again or flushing, so only its I/O thread can write what libdbus left queued.
            let poster = try ChildProcess("cnotify-probe", ["flood-hold", "backlog.x", "20000"],
                                          environment: bus.environment, stdin: true)
            defer { poster.closeStdin() }
            try poster.waitForLine("posted", timeout: 60)
            #expect(try sink.waitForExit(timeout: 60) == 0)
            #expect(sink.lines.last?.hasPrefix("received=20000 gaps=0 ") == true, "\(sink.lines)")
            poster.closeStdin()
            #expect(try poster.waitForExit() == 0)
        }

        @Test("posts arrive in the order each poster posted them")
        func perPosterOrder() throws {
            let a = (0..<50).map { "order.a.\($0)" }, b = (0..<50).map { "order.b.\($0)" }
            let observer = try ChildProcess("cnotify-probe", ["observe", "100"] + a + b, environment: bus.environment)
            try observer.waitForLine("ready")
            let posters = try [a, b].map { names in
                try ChildProcess("notifyutil", ["-z", "0"] + names.flatMap { ["-p", $0] }, environment: bus.environment)
            }
            for p in posters { #expect(try p.waitForExit() == 0) }
            #expect(try observer.waitForExit() == 0)
            let got = observer.lines.dropFirst()
            #expect(got.filter { $0.hasPrefix("order.a.") } == a[...])
            #expect(got.filter { $0.hasPrefix("order.b.") } == b[...])
        }

        @Test("a handler that posts its own name sees 1...10 in order, never re-entered")
        func postingInsideCallbackDoesNotReenter() throws {
            let probe = try ChildProcess("cnotify-probe", ["reentrant", "reenter.x"], environment: bus.environment)
            #expect(try probe.waitForExit() == 0)
            #expect(probe.lines == (1...10).map { "\($0) depth=1" })
        }

        @Test("an observer removing itself inside its callback is called once and never again")
        func removeInsideCallback() throws {
            let probe = try ChildProcess("cnotify-probe", ["remove-in-callback", "selfremove.x"], environment: bus.environment)
            #expect(try probe.waitForExit() == 0)
            #expect(probe.lines == ["removed status=OK", "selfremove.x.done", "calls=1"])
        }

        @Test("a file-descriptor registration gets its token in network byte order per post")
        func fileDescriptorRegistration() throws {
            let probe = try ChildProcess("cnotify-probe", ["fd", "fd.x", "2"], environment: bus.environment)
            let ready = try probe.waitForLine { $0.hasPrefix("ready token=") }
            let token = ready.dropFirst("ready token=".count)
            try notifyutilPost(["fd.x", "fd.x"], bus: bus)
            #expect(try probe.waitForExit() == 0)
            #expect(Array(probe.lines.dropFirst()) == ["token=\(token)", "token=\(token)"])
        }

        @Test("notifyutil -1 key waits for one notification, prints the key and exits 0")
        func notifyutilWaitsForOne() throws {
            let waiter = try ChildProcess("notifyutil", ["-1", "wait.one"], environment: bus.environment)
            try repeatUntil("notifyutil -1 to receive", action: { try notifyutilPost(["wait.one"], bus: bus) },
                            done: { !waiter.isRunning })
            #expect(try waiter.waitForExit() == 0)
            #expect(waiter.lines == ["wait.one"])
        }

        @Test("notifyutil -v prints [token] secs.msec key state type")
        func notifyutilVerbose() throws {
            let waiter = try ChildProcess("notifyutil", ["-v", "-1", "verbose.x"], environment: bus.environment)
            try repeatUntil("notifyutil -v to receive", action: { try notifyutilPost(["verbose.x"], bus: bus) },
                            done: { !waiter.isRunning })
            #expect(try waiter.waitForExit() == 0)
            let line = try #require(waiter.lines.first)
            #expect(line.wholeMatch(of: /\[\d+\] \d+\.\d{3} verbose\.x 0 port/) != nil, "got: \(line)")
        }

        @Test("a forked child is refused (OPT_DISABLE) and leaves the parent's connection intact")
        func forkedChild() throws {
            let probe = try ChildProcess("cnotify-probe", ["fork", "fork.x"], environment: bus.environment)
            #expect(try probe.waitForExit() == 0, "\(probe.stderr)")
            #expect(probe.lines == ["child status=0", "fork.x"])
        }
    }
}

import DarwinNotify
import Dispatch
import Foundation
import Synchronization
import Testing

/// Namespace observation (issue 13, part 1): every post of a namespace and of the names under it,
/// with D-Bus arg0namespace semantics, from any process, across a bus restart.
extension IntegrationSuites {
    @Suite("Namespace observation", .serialized)
    struct NamespaceTests {
        let bus: TestBus
        init() throws { bus = try TestBus() }

        @Test("notifyutil -W3 prints the full names under the namespace, never com.examples, then exits")
        func notifyutilNamespace() throws {
            let watcher = try ChildProcess("notifyutil", ["-W3", "com.example"], environment: bus.environment)
            // Registered once a post under the namespace is heard; the sentinel posts are counted.
            try repeatUntil("the watcher to register", action: {
                try notifyutilPost(["com.example.sentinel"], bus: bus)
            }, done: { !watcher.lines.isEmpty })
            try notifyutilPost(["com.examples", "other.name", "com.example", "com.example.b.c"], bus: bus)
            #expect(try watcher.waitForExit() == 0, "\(watcher.stderr)")
            // Three posts under the namespace, whichever: the sentinels, then com.example and its child.
            #expect(watcher.lines.count == 3, "\(watcher.lines)")
            #expect(watcher.lines.allSatisfy { $0 == "com.example" || $0.hasPrefix("com.example.") }, "\(watcher.lines)")
            #expect(!watcher.lines.contains("com.examples") && !watcher.lines.contains("other.name"), "\(watcher.lines)")
        }

        @Test("Swift: a namespace observer and an exact observer of one name each get a post once; AsyncSequence too")
        func swiftNamespace() async throws {
            let center = try NotifyCenter(bus: bus.address)
            let byNamespace = Mutex<[String]>([]), exact = Mutex(0)
            let observation = try center.observe(namespace: "org.test", queue: nil) { name in byNamespace.withLock { $0.append(name) } }
            let exactObservation = try center.observe("org.test.one", queue: nil) { _ in exact.withLock { $0 += 1 } }
            let sequence = try center.notifications(namespace: "org.test")
            try notifyutilPost(["org.testing", "org.test.one", "org.test", "org.test.two.deep", "org.test.done"], bus: bus)
            var fromSequence: [String] = []
            for await note in sequence {
                fromSequence.append(note.name)
                if note.name == "org.test.done" { break }
            }
            try repeatUntil("the closure observer to see the last post", action: {}, done: {
                byNamespace.withLock { $0.last == "org.test.done" }
            })
            let expected = ["org.test.one", "org.test", "org.test.two.deep", "org.test.done"]
            #expect(byNamespace.withLock { $0 } == expected)
            #expect(fromSequence == expected)
            #expect(exact.withLock { $0 } == 1)
            observation.cancel()
            exactObservation.cancel()
        }

        @Test("notifyutil -W user.uid.N gets N's posts and no others; the wider rule's cost is counted (issue 20 item 2)")
        func perUserNamespace() throws {
            let n = geteuid() == 0 ? 1000 : Int(geteuid())
            let watcher = try ChildProcess("notifyutil", ["-W2", "user.uid.\(n)"], environment: bus.environment)
            let probe = try ChildProcess("cnotify-probe", ["watch-namespace", "user.uid.\(n)"], environment: bus.environment, stdin: true)
            try probe.waitForLine("ready")
            // Registered when a post of its own namespace arrives: posted until it does.
            try repeatUntil("the -W watcher to register", action: {
                try notifyutilPost(["user.uid.\(n).first"], bus: bus)
            }, done: { !watcher.lines.isEmpty })
            // Root may post every uid's names; a non-root user only its own, so then only its own.
            let others = geteuid() == 0 ? ["user.uid.\(n + 1).x", "user.uid.\(n)0.y", "user.uid.0.z"] : []
            try notifyutilPost(others + ["user.uid.\(n).second"], bus: bus)
            #expect(try watcher.waitForExit() == 0)
            #expect(watcher.lines.filter { $0 != "user.uid.\(n).first" } == ["user.uid.\(n).second"], "\(watcher.lines)")
            let last = try probe.waitForLine { $0.hasPrefix("user.uid.\(n).second ") }
            #expect(!probe.lines.contains { $0.hasPrefix("user.uid.\(n + 1)") || $0.hasPrefix("user.uid.\(n)0") || $0.hasPrefix("user.uid.0.") })
            if geteuid() == 0 { #expect(last.hasSuffix("unmatched=3"), "\(last)") } // the 3 others came by the wider rule and were dropped
            probe.closeStdin()
            _ = try probe.waitForExit()
        }

        @Test("a bad namespace is invalidName; self. namespaces work with no bus; the rule comes back after a restart")
        func edges() throws {
            let center = try NotifyCenter(bus: bus.address)
            for bad in ["", "1abc", "a..b", "a.", ".a", "has space", "a/b"] {
                #expect { try center.observe(namespace: bad, queue: nil) { _ in } } throws: {
                    ($0 as? NotifyError)?.code == .invalidName
                }
            }
            let offline = try NotifyCenter(bus: "unix:path=/nonexistent/darwin-notify-ns")
            let local = Mutex<[String]>([])
            let localObservation = try offline.observe(namespace: "self.ns", queue: nil) { name in local.withLock { $0.append(name) } }
            try offline.post("self.ns.x")
            try offline.post("self.nsx")
            #expect(local.withLock { $0 } == ["self.ns.x"])
            localObservation.cancel()

            let heard = Mutex(false)
            let observation = try center.observe(namespace: "after.restart", queue: nil) { _ in heard.withLock { $0 = true } }
            try bus.restart()
            try repeatUntil(interval: 0.05, "a namespace post after the restart", action: {
                _ = try run("notifyutil", ["-z", "0", "-p", "after.restart.x"], environment: bus.environment)
            }, done: { heard.withLock { $0 } })
            observation.cancel()
        }
    }
}

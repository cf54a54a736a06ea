import DarwinNotify
import Dispatch
import Foundation
import Synchronization
import Testing

/// The rest of notify(3) from Swift: tokens of every kind, suspension, state, `self.` names.
/// Posts come from `notifyutil` in another process.
extension IntegrationSuites {
    @Suite("Swift tokens", .serialized)
    struct SwiftTokenTests {
        let bus: TestBus
        let center: NotifyCenter
        init() throws {
            bus = try TestBus()
            center = try NotifyCenter(bus: bus.address)
        }

        /// Waits until `token` saw a post: a second token on a sentinel name posted after it by
        /// the same poster arrives later, so its arrival is the handshake.
        private func postThenSentinel(_ names: [String], sentinel: NotifyToken) throws {
            try notifyutilPost(names + [sentinel.name], bus: bus)
            try repeatUntil("the sentinel \(sentinel.name)", action: {}, done: { (try? sentinel.check()) == true })
        }

        @Test("a check token counts posts; notify_check is true first, then only after a post")
        func checkToken() throws {
            let token = try center.checkingToken("swift.tok.check")
            let sentinel = try center.checkingToken("swift.tok.check.sentinel")
            _ = try sentinel.check()
            #expect(try token.check() == true)
            #expect(try token.check() == false)
            try postThenSentinel(["swift.tok.check"], sentinel: sentinel)
            #expect(try token.check() == true)
            #expect(try token.check() == false)
        }

        @Test("a file-descriptor token drives a DispatchSource read source")
        func fileDescriptorToken() throws {
            let token = try center.fileDescriptorToken("swift.tok.fd")
            let fd = try #require(token.fileDescriptor)
            let got = Mutex<[Int32]>([])
            let arrived = DispatchSemaphore(value: 0)
            let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: DispatchQueue(label: "test.fd"))
            source.setEventHandler {
                let posts = (try? token.readPosts()) ?? []
                got.withLock { $0 += posts }
                for _ in posts { arrived.signal() }
            }
            source.resume()
            try notifyutilPost(["swift.tok.fd", "swift.tok.fd"], bus: bus)
            #expect(arrived.wait(timeout: .now() + 20) == .success)
            #expect(arrived.wait(timeout: .now() + 20) == .success)
            source.cancel()
            #expect(got.withLock { $0 } == [token.rawValue, token.rawValue])
        }

        @Test("a signal token raises its signal; a bad signal number is .invalidSignal")
        func signalToken() throws {
            // SIGWINCH's default action is to ignore it: a stray one cannot end the test process.
            let raised = DispatchSemaphore(value: 0)
            let source = DispatchSource.makeSignalSource(signal: SIGWINCH, queue: DispatchQueue(label: "test.signal"))
            source.setEventHandler { raised.signal() }
            source.resume()
            let token = try center.signalToken("swift.tok.signal", signal: SIGWINCH)
            _ = try token.check()
            try notifyutilPost(["swift.tok.signal"], bus: bus)
            #expect(raised.wait(timeout: .now() + 20) == .success)
            #expect(try token.check() == true)
            source.cancel()
            #expect(throws: NotifyError.self) { try center.signalToken("swift.tok.signal", signal: 0) }
            expectError(NotifyError.Code.invalidSignal) { () throws(NotifyError) in _ = try center.signalToken("swift.tok.signal", signal: 4096) }
        }

        @Test("a dispatch token's closure may cancel its token; nothing runs after cancel")
        func dispatchToken() throws {
            let runs = Mutex(0)
            let first = DispatchSemaphore(value: 0)
            let box = Mutex<NotifyToken?>(nil)
            let queue = DispatchQueue(label: "test.dispatch")
            let token = try center.dispatchToken("swift.tok.dispatch", queue: queue) { number in
                dispatchPrecondition(condition: .onQueue(queue))
                runs.withLock { $0 += 1 }
                box.withLock { $0 }?.cancel() // its own token, from inside
                first.signal()
            }
            box.withLock { $0 = token }
            let sentinel = try center.checkingToken("swift.tok.dispatch.sentinel")
            _ = try sentinel.check()
            try notifyutilPost(["swift.tok.dispatch"], bus: bus)
            #expect(first.wait(timeout: .now() + 20) == .success)
            #expect(token.isCancelled)
            try postThenSentinel(["swift.tok.dispatch", "swift.tok.dispatch"], sentinel: sentinel)
            queue.sync {} // anything queued for the token has run (or been skipped)
            #expect(runs.withLock { $0 } == 1)
        }

        @Test("suspend, three posts, resume: one delivery; resume without suspend does not throw, as Apple's (issue 33 item 8)")
        func suspendResume() throws {
            let token = try center.fileDescriptorToken("swift.tok.suspend")
            let sentinel = try center.checkingToken("swift.tok.suspend.sentinel")
            _ = try sentinel.check()
            try token.suspend()
            try postThenSentinel(Array(repeating: "swift.tok.suspend", count: 3), sentinel: sentinel)
            #expect(try token.readPosts().isEmpty)
            try token.resume()
            #expect(try token.readPosts() == [token.rawValue])
            try token.resume() // not suspended: nothing changes, nothing thrown
            try postThenSentinel(["swift.tok.suspend"], sentinel: sentinel)
            #expect(try token.readPosts() == [token.rawValue], "delivered at once: the count stayed 0")
        }

        @Test("a dispatch token's suspension is a flag, as Libnotify's coalesced dispatch registrations: suspended twice, resumed once, it delivers; a descriptor token's counts, as notifyd's")
        func suspendIsAFlagForDispatch() throws {
            let runs = Mutex(0)
            let queue = DispatchQueue(label: "swift.tok.flag")
            let dispatch = try center.dispatchToken("swift.tok.flag", queue: queue) { _ in runs.withLock { $0 += 1 } }
            let counted = try center.fileDescriptorToken("swift.tok.flag")
            let sentinel = try center.checkingToken("swift.tok.flag.sentinel")
            _ = try sentinel.check()
            try dispatch.suspend(); try dispatch.suspend()
            try counted.suspend(); try counted.suspend()
            try dispatch.resume()
            try counted.resume()
            try postThenSentinel(["swift.tok.flag"], sentinel: sentinel)
            queue.sync {} // a delivery queued for the dispatch token has run
            #expect(runs.withLock { $0 } == 1, "resumed once after two suspends: delivered, as on macOS")
            #expect(try counted.readPosts().isEmpty, "the descriptor token is still suspended once")
            try counted.resume()
            #expect(try counted.readPosts() == [counted.rawValue])
        }

        @Test("state by name and by token; a cancelled token's state is .invalidToken")
        func state() throws {
            // The state lives where this bus's state lives by default (a test never changes its
            // own process's environment): removed at the end; another process finds it the same way.
            let directory = try NotifyCenter.stateDirectory(bus: bus.address)
            #expect(directory.hasPrefix("/tmp/darwin-notify-state-") || ProcessInfo.processInfo.environment["DARWIN_NOTIFY_STATE_DIR"] != nil)
            defer { if directory.hasPrefix("/tmp/darwin-notify-state-") { try? FileManager.default.removeItem(atPath: directory) } }
            try center.setState(7, for: "swift.tok.state")
            #expect(try center.state(of: "swift.tok.state") == 7)
            let token = try center.checkingToken("swift.tok.state")
            #expect(try token.state() == 7)
            try token.setState(UInt64.max)
            #expect(try center.state(of: "swift.tok.state") == UInt64.max)
            // Another process reads it.
            let other = try run("cnotify-probe", ["state", "get", "swift.tok.state"], environment: ["DARWIN_NOTIFY_BUS": bus.address])
            #expect(other.out == "get swift.tok.state: OK 18446744073709551615\n")
            token.cancel()
            expectError(NotifyError.Code.invalidToken, "(state of a cancelled token)") { () throws(NotifyError) in _ = try token.state() }
        }

        @Test("self. names are delivered in the process, with no bus")
        func selfNames() throws {
            let nowhere = try NotifyCenter(bus: "unix:path=/nonexistent/darwin-notify")
            let got = Mutex<[String]>([])
            let observation = try nowhere.observe("self.swift", queue: nil) { name in got.withLock { $0.append(name) } }
            try nowhere.post("self.swift")
            try nowhere.post("self.swift")
            #expect(got.withLock { $0 } == ["self.swift", "self.swift"])
            let token = try nowhere.checkingToken("self.swift.check")
            _ = try token.check()
            try nowhere.post("self.swift.check")
            #expect(try token.check() == true)
            try nowhere.setState(3, for: "self.swift.state")
            #expect(try nowhere.state(of: "self.swift.state") == 3)
            #expect(throws: NotifyError.self) { try nowhere.post("needs.the.bus") }
            observation.cancel()
        }
    }
}

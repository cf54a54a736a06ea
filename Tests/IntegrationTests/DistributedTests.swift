import CNotify
import DarwinNotify
import DarwinNotifyFoundation
import Foundation
import Synchronization
import Testing

/// DistributedNotificationCenter (issue 24): a name, an object and a property-list userInfo
/// between processes, with Apple's suspension behaviours. The other process is `distnotify`
/// (the CLI) or a python-dbus client written from docs/PROTOCOL.md.
extension IntegrationSuites {
    @Suite("Distributed notifications", .serialized)
    struct DistributedTests {
        let bus: TestBus
        init() throws { bus = try TestBus() }

        /// The python-dbus client (Debian's python3, which has python3-dbus and python3-gi).
        static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().path
            + "/Fixtures/distributed_client.py"

        /// What an observer saw, in order (Notification is not Sendable: its parts are kept).
        final class Seen: Sendable {
            struct Note: @unchecked Sendable { // userInfo holds property-list values only
                let name: String
                let object: String?
                let userInfo: [AnyHashable: Any]?
            }
            let notes = Mutex<[Note]>([])
            func add(_ n: Notification) {
                notes.withLock { $0.append(Note(name: n.name.rawValue, object: n.object as? String, userInfo: n.userInfo)) }
            }
            var names: [String] { notes.withLock { $0.map(\.name) } }
            var count: Int { notes.withLock { $0.count } }
            func labels() -> [String] { notes.withLock { $0.map { "\($0.name)/\($0.object ?? "-")" } } }
        }

        func post(_ arguments: [String]) throws {
            let result = try run("distnotify", ["post", "--bus", bus.address] + arguments)
            guard result.status == 0 else { throw TestFailure("distnotify post \(arguments) failed (\(result.status)): \(result.err)") }
        }

        func watcher(_ arguments: [String]) throws -> ChildProcess {
            let child = try ChildProcess("distnotify", ["watch", "--bus", bus.address, "--json"] + arguments)
            try child.waitForStderr("distnotify: watching")
            return child
        }

        @Test("a userInfo of every property-list type crosses unchanged, from a process and to one")
        func everyType() throws {
            let center = try DistributedNotificationCenter(bus: bus.address)
            let seen = Seen()
            let token = center.addObserver(forName: Notification.Name("types.in"), object: nil, suspensionBehavior: .hold) { seen.add($0) }
            defer { center.removeObserver(token) }
            try post(["types.in", "--object", "maker", "-u", """
                {"s":"é😀\\n","i":-42,"max":9223372036854775807,"r":2.5,"whole":2.0,"b":true,"f":false,
                 "d":{"$data":"AAEC/w=="},"t":{"$date":1700000000.5},"a":[1,"x",[true]],"dict":{"k":"v"},"empty":[]}
                """])
            try repeatUntil("the post from distnotify", action: {}, done: { seen.count == 1 })
            let note = try #require(seen.notes.withLock { $0.first })
            #expect(note.object == "maker")
            let info = try #require(note.userInfo)
            #expect(info["s"] as? String == "é😀\n")
            #expect(info["i"] as? Int == -42)
            #expect(info["max"] as? Int == Int.max)
            #expect(info["r"] as? Double == 2.5)
            #expect(info["whole"] as? Double == 2.0, "a real stays a real: \(String(describing: info["whole"]))")
            #expect(info["b"] as? Bool == true)
            #expect(info["f"] as? Bool == false)
            #expect(info["d"] as? Data == Data([0, 1, 2, 255]))
            #expect(info["t"] as? Date == Date(timeIntervalSince1970: 1_700_000_000.5))
            let array = try #require(info["a"] as? [Any])
            #expect(array.count == 3 && array[0] as? Int == 1 && array[1] as? String == "x" && (array[2] as? [Any])?.first as? Bool == true)
            #expect((info["dict"] as? [String: Any])?["k"] as? String == "v")
            #expect((info["empty"] as? [Any])?.isEmpty == true)

            // The other way: Swift values, bridged numbers included, to a watching process.
            let child = try watcher(["types.out", "--count", "1"])
            center.postNotificationName(Notification.Name("types.out"), object: "swift", userInfo: [
                "s": "text", "i": 7, "i8": Int8(-8), "u32": UInt32(4_000_000_000), "r": 0.25, "fl": Float(1.5),
                "b": true, "nsb": NSNumber(value: false), "nsi": NSNumber(value: 12), "nsd": NSNumber(value: 0.5),
                "d": Data([9, 8]), "t": Date(timeIntervalSince1970: 86400), "a": [1, "two", ["three": 3]] as [Any],
            ])
            #expect(try child.waitForExit() == 0)
            #expect(child.stdout.trimmingCharacters(in: .whitespacesAndNewlines).hasPrefix("""
                {"name":"types.out","object":"swift","userInfo":{"a":[1,"two",{"three":3}],"b":true,"d":{"$data":"CQg="},\
                "fl":1.5,"i":7,"i8":-8,"nsb":false,"nsd":0.5,"nsi":12,"r":0.25,"s":"text","t":{"$date":86400.0},"u32":4000000000},
                """), "\(child.stdout)")
        }

        @Test("one poster's notifications arrive in order, numbered 1, 2, 3 … with no gap; posts of the same name stay apart")
        func orderAndNumbering() throws {
            let center = try DistributedNotificationCenter(bus: bus.address)
            let child = try watcher(["o.seq", "--count", "50"])
            let plain = try ChildProcess("cnotify-probe", ["stats", "o.seq", "o.end"], environment: bus.environment, stdin: true)
            try plain.waitForLine("ready")
            for i in 1...50 { center.postNotificationName(.init("o.seq"), object: nil, userInfo: ["i": i]) }
            try center.notifyCenter?.post("o.end") // a Darwin post of another name, on the same connection
            #expect(try child.waitForExit() == 0)
            let lines = child.lines
            #expect(lines.count == 50)
            for (k, line) in lines.enumerated() {
                #expect(line.contains(#""userInfo":{"i":\#(k + 1)}"#) && line.contains(#""sequence":\#(k + 1),"#), "\(k): \(line)")
            }
            // The Darwin observer of o.seq saw none of them: distributed names are their own.
            try plain.waitForLine { $0.hasPrefix("o.end") }
            #expect(!plain.lines.contains { $0.hasPrefix("o.seq") }, "\(plain.lines)")
            plain.closeStdin()
            _ = try plain.waitForExit()
        }

        @Test("postToAllSessions reaches the all-sessions bus as well; a plain post stays on the center's own bus")
        func allSessions() throws {
            let everyone = try TestBus() // the system bus's stand-in
            let center = try DistributedNotificationCenter(bus: bus.address, allSessionsBus: everyone.address)
            let userWatcher = try watcher(["scope.x", "--count", "2"])
            let systemWatcher = try ChildProcess("distnotify", ["watch", "--bus", everyone.address, "--json", "--count", "1", "scope.x"])
            try systemWatcher.waitForStderr("distnotify: watching")
            center.postNotificationName(.init("scope.x"), object: "mine", userInfo: nil)
            center.postNotificationName(.init("scope.x"), object: "all", userInfo: ["k": 1], options: .postToAllSessions)
            #expect(try userWatcher.waitForExit() == 0)
            #expect(try systemWatcher.waitForExit() == 0)
            #expect(userWatcher.lines.map { $0.contains(#""object":"mine""#) } == [true, false], "\(userWatcher.lines)")
            #expect(userWatcher.lines.last?.contains(#""object":"all","userInfo":{"k":1}"#) == true, "\(userWatcher.lines)")
            #expect(systemWatcher.lines.count == 1 && systemWatcher.lines[0].contains(#""object":"all","userInfo":{"k":1}"#),
                    "only the post for all sessions reached the other bus: \(systemWatcher.lines)")
        }

        @Test("as on macOS: a nil-queue block and a selector observer run on the main queue; userInfo numbers are NSNumbers; nothing throws")
        func appleShapes() throws {
            let center = try DistributedNotificationCenter(bus: bus.address)
            // The main queue, marked: under Swift Testing an async main drains it on a thread of
            // libdispatch's (Thread.isMainThread is false there, as after dispatchMain on macOS);
            // Tests/AppleStyle checks the main thread itself, under a run loop.
            let onMainQueue = DispatchSpecificKey<Bool>()
            DispatchQueue.main.setSpecific(key: onMainQueue, value: true)
            defer { DispatchQueue.main.setSpecific(key: onMainQueue, value: nil) }
            final class Observer: Sendable {
                let key: DispatchSpecificKey<Bool>
                init(_ key: DispatchSpecificKey<Bool>) { self.key = key }
                let onMain = Mutex<[Bool]>([])
                func changed(_ note: Notification) { onMain.withLock { $0.append(DispatchQueue.getSpecific(key: key) == true) } }
            }
            let observer = Observer(onMainQueue)
            center.addObserver(observer, selector: Observer.changed, name: .init("apple.x"), object: nil)
            let casts = Mutex<[String]>([])
            let token = center.addObserver(forName: .init("apple.x"), object: nil, queue: nil) { note in
                let info = note.userInfo ?? [:]
                let line = "main=\(DispatchQueue.getSpecific(key: onMainQueue) == true) double=\(info["i"] as? Double ?? -1) float=\(info["r"] as? Float ?? -1) "
                    + "int=\(info["b"] as? Int ?? -1) bool=\(info["one"] as? Bool ?? false) number=\(info["i"] is NSNumber)"
                casts.withLock { $0.append(line) }
            }
            defer { center.removeObserver(token); center.removeObserver(observer) }
            try post(["apple.x", "--user-info", #"{"i": 3, "r": 0.5, "b": true, "one": 1}"#])
            try repeatUntil("both observers ran", action: {}, done: { casts.withLock { $0.count } == 1 && observer.onMain.withLock { $0.count } == 1 })
            #expect(casts.withLock { $0 } == ["main=true double=3.0 float=0.5 int=1 bool=true number=true"])
            #expect(observer.onMain.withLock { $0 } == [true])
        }

        @Test("what reached the center while suspended is held, even with its delivery queue busy: a resume then delivers one coalesced notification, not five")
        func suspensionHoldsWhatArrived() throws {
            let center = try DistributedNotificationCenter(bus: bus.address)
            // An observer that keeps the delivery queue busy until released.
            let release = DispatchSemaphore(value: 0), blocking = DispatchSemaphore(value: 0)
            let blocker = try center.observe(.init("busy.block"), object: nil, behavior: .deliverImmediately, delivery: .deliveryQueue,
                                             skippingOwnPosts: false) { _ in blocking.signal(); release.wait() }
            let seen = Seen()
            let token = center.addObserver(forName: .init("busy.c"), object: nil, suspensionBehavior: .coalesce, queue: nil) { seen.add($0) }
            defer { center.removeObserver(token); center.removeObserver(blocker) }
            center.suspended = true
            try post(["busy.block"])
            #expect(blocking.wait(timeout: .now() + 20) == .success)
            for i in 1...5 { try post(["busy.c", "--user-info", #"{"i": \#(i)}"#]) }
            try repeatUntil("the C core to hand over all six", action: {}, done: { center.statistics.delivered >= 6 })
            center.suspended = false
            release.signal()
            try repeatUntil("the coalesced notification", action: {}, done: { seen.count >= 1 })
            // Anything else would have come by now: a second handshake through the same queues.
            try post(["busy.c", "--user-info", #"{"i": 6}"#])
            try repeatUntil("the notification after the resume", action: {}, done: { seen.count >= 2 })
            let values = seen.notes.withLock { $0.map { $0.userInfo?["i"] as? Int ?? -1 } }
            #expect(values == [5, 6], "\(values)")
        }

        @Test("postToAllSessions with the other bus gone: delivered on this bus, the failure reported once, nothing thrown")
        func allSessionsPartial() throws {
            let gone = try makeTemporaryDirectory("gone") + "/bus"
            let center = try DistributedNotificationCenter(bus: bus.address, allSessionsBus: "unix:path=" + gone)
            let reported = Mutex<[DistributedNotificationError]>([])
            center.failureHandler = { error in reported.withLock { $0.append(error) } }
            let userWatcher = try watcher(["partial.x", "--count", "1"])
            center.postNotificationName(.init("partial.x"), object: "all", userInfo: nil, options: .postToAllSessions)
            #expect(try userWatcher.waitForExit() == 0)
            #expect(center.failureCount == 1)
            #expect(reported.withLock { $0.first?.message.contains("not for all sessions") } == true, "\(reported.withLock { $0 })")
        }

        @Test("inside a distributed handler, CNotify_center_current_post describes that notification, not the last Darwin post")
        func currentPostInsideDistributedHandler() throws {
            let center = try NotifyCenter(bus: bus.address)
            let darwin = try center.observe("cp.darwin", queue: nil) { _ in }
            defer { darwin.cancel() }
            let probe = CurrentPostProbe(center: center.cCenter)
            var id: UInt64 = 0
            let context = Unmanaged.passRetained(probe).toOpaque()
            #expect(CNotify_distributed_add_handler(center.cCenter, "cp.dist", nil, { context, note in
                let probe = Unmanaged<CurrentPostProbe>.fromOpaque(context!).takeUnretainedValue()
                var info = CNotify_post_info()
                let status = CNotify_center_current_post(probe.center, &info)
                let reported = info.sender.map { String(cString: $0) } ?? "-"
                let poster = note!.pointee.sender.map { String(cString: $0) } ?? "-"
                probe.reports.withLock { $0.append(status == 0 && reported == poster ? "this post" : "stale: \(reported), not \(poster)") }
            }, context, { Unmanaged<CurrentPostProbe>.fromOpaque($0!).release() }, &id) == 0)
            defer { CNotify_distributed_remove_handler(center.cCenter, id) }
            try notifyutilPost(["cp.darwin"], bus: bus) // delivered first: what a stale answer would describe
            try repeatUntil("the Darwin post", action: {}, done: { center.statistics.delivered >= 1 })
            try post(["cp.dist"])
            try repeatUntil("the distributed post", action: {}, done: { probe.reports.withLock { $0.count } == 1 })
            #expect(probe.reports.withLock { $0 } == ["this post"])
        }

        @Test("observers filter by name (nil: every name) and by object (nil: any)")
        func filters() throws {
            let center = try DistributedNotificationCenter(bus: bus.address)
            let exact = Seen(), anyObject = Seen(), everything = Seen(), objectTwo = Seen()
            var tokens: [NSObjectProtocol] = []
            tokens.append(center.addObserver(forName: .init("f.x"), object: "one", suspensionBehavior: .hold) { exact.add($0) })
            tokens.append(center.addObserver(forName: .init("f.x"), object: nil, suspensionBehavior: .hold) { anyObject.add($0) })
            tokens.append(center.addObserver(forName: nil, object: nil, suspensionBehavior: .hold) { everything.add($0) })
            tokens.append(center.addObserver(forName: nil, object: "two", suspensionBehavior: .hold) { objectTwo.add($0) })
            defer { tokens.forEach(center.removeObserver) }
            try post(["f.x", "--object", "one"])
            try post(["f.x", "--object", "two"])
            try post(["f.y"])
            try post(["f.y", "--object", "two"])
            try post(["f.end"])
            try repeatUntil("the last post", action: {}, done: { everything.names.last == "f.end" })
            #expect(exact.labels() == ["f.x/one"])
            #expect(anyObject.labels() == ["f.x/one", "f.x/two"])
            #expect(everything.labels() == ["f.x/one", "f.x/two", "f.y/-", "f.y/two", "f.end/-"])
            #expect(objectTwo.labels() == ["f.x/two", "f.y/two"])
        }

        @Test("suspended: hold delivers all in order on resume, coalesce the last per name and object, drop none; deliverImmediately overrides")
        func suspension() throws {
            let center = try DistributedNotificationCenter(bus: bus.address)
            let dropped = Seen(), coalesced = Seen(), held = Seen(), immediate = Seen()
            var tokens: [NSObjectProtocol] = []
            tokens.append(center.addObserver(forName: .init("s.drop"), object: nil, suspensionBehavior: .drop) { dropped.add($0) })
            tokens.append(center.addObserver(forName: .init("s.coal"), object: nil, suspensionBehavior: .coalesce) { coalesced.add($0) })
            tokens.append(center.addObserver(forName: .init("s.hold"), object: nil, suspensionBehavior: .hold) { held.add($0) })
            tokens.append(center.addObserver(forName: .init("s.now"), object: nil, suspensionBehavior: .deliverImmediately) { immediate.add($0) })
            defer { tokens.forEach(center.removeObserver) }

            center.suspended = true
            let posts: [[String]] = [["s.hold", "--object", "1"], ["s.coal", "--object", "a", "-u", #"{"v":1}"#],
                                     ["s.drop"], ["s.coal", "--object", "a", "-u", #"{"v":2}"#], ["s.coal", "--object", "b"],
                                     ["s.hold", "--object", "2"], ["s.drop"], ["s.hold", "--object", "3"]]
            for p in posts { try post(p) }
            // Every post reached the center's handlers (the C core counts them as it hands them over).
            try repeatUntil("the 8 posts in the C core", action: {}, done: { center.statistics.delivered == 8 })
            #expect(held.count == 0 && coalesced.count == 0 && dropped.count == 0)
            center.suspended = false
            try repeatUntil("the held posts", action: {}, done: { held.count == 3 && coalesced.count == 2 })
            #expect(held.labels() == ["s.hold/1", "s.hold/2", "s.hold/3"])
            #expect(coalesced.labels() == ["s.coal/a", "s.coal/b"])
            #expect(coalesced.notes.withLock { $0.first?.userInfo?["v"] as? Int } == 2, "the last of a/s.coal")
            #expect(dropped.count == 0)

            // A .deliverImmediately observer gets its post while suspended, after what was held.
            center.suspended = true
            try post(["s.hold", "--object", "4"])
            try post(["s.now"])
            try repeatUntil("the immediate observer", action: {}, done: { immediate.count == 1 })
            #expect(center.suspended)
            #expect(held.labels().last == "s.hold/4", "held posts are flushed first, as Apple does")

            // A post with deliverImmediately reaches a .hold observer of a suspended center at once.
            try post(["s.hold", "--object", "5"])
            try post(["s.hold", "--object", "6", "--deliver-immediately"])
            try repeatUntil("the immediate post", action: {}, done: { held.count == 6 })
            #expect(held.labels().suffix(2) == ["s.hold/5", "s.hold/6"])
            #expect(center.suspended)
            center.suspended = false
        }

        @Test("the selector form calls a method of an observer it holds weakly; removeObserver(observer) removes it")
        func selectorForm() throws {
            let center = try DistributedNotificationCenter(bus: bus.address)
            var settings: SettingsObserver? = SettingsObserver()
            weak let weakSettings = settings
            center.addObserver(settings!, selector: SettingsObserver.changed, name: .init("sel.x"), object: nil, suspensionBehavior: .hold)
            let sentinel = Seen()
            let token = center.addObserver(forName: .init("sel.x"), object: nil, suspensionBehavior: .hold) { sentinel.add($0) }
            defer { center.removeObserver(token) }
            try post(["sel.x", "--object", "a"])
            try repeatUntil("the method", action: {}, done: { settings?.seen.withLock { $0 } == ["a"] })
            settings = nil
            #expect(weakSettings == nil, "the center does not keep the observer alive")
            try post(["sel.x", "--object", "b"])
            try repeatUntil("the sentinel", action: {}, done: { sentinel.count == 2 })
            // An observer removed by identity gets nothing more.
            let other = SettingsObserver()
            center.addObserver(other, selector: SettingsObserver.changed, name: .init("sel.x"), object: nil, suspensionBehavior: .hold)
            try post(["sel.x", "--object", "c"])
            try repeatUntil("the second observer", action: {}, done: { other.seen.withLock { $0 } == ["c"] })
            center.removeObserver(other)
            try post(["sel.x", "--object", "d"])
            try repeatUntil("the sentinel", action: {}, done: { sentinel.count == 4 })
            #expect(other.seen.withLock { $0 } == ["c"])
        }

        @Test("a userInfo that is no property list is refused at the poster, and nothing of it is sent")
        func refusals() throws {
            let center = try DistributedNotificationCenter(bus: bus.address)
            let child = try watcher(["--count", "1"])
            struct NotAPlist {}
            var deep: [String: Any] = [:]
            for _ in 0..<40 { deep = ["in": deep] }
            let cases: [(String, [AnyHashable: Any], DistributedNotificationError.Code, String)] = [
                ("a struct", ["k": NotAPlist()], .notPropertyList, #"userInfo["k"]"#),
                ("a struct in an array", ["k": [1, NotAPlist()] as [Any]], .notPropertyList, #"userInfo["k"][1]"#),
                ("an integer key", [1: "x"], .keyNotString, "userInfo"),
                ("UInt64.max", ["k": UInt64.max], .outOfBounds, #"userInfo["k"]"#),
                ("NaN", ["k": Double.nan], .outOfBounds, #"userInfo["k"]"#),
                ("an infinite date", ["k": Date.distantFuture.addingTimeInterval(.infinity)], .outOfBounds, #"userInfo["k"]"#),
                ("41 levels", deep, .outOfBounds, ""),
                ("70,000 bytes", ["k": String(repeating: "x", count: 70_000)], .outOfBounds, #"userInfo["k"]"#),
                ("9,000 values", Dictionary(uniqueKeysWithValues: (0..<9000).map { ("k\($0)", $0) }), .outOfBounds, ""),
            ]
            // Apple's post throws nothing: each refusal goes to the center's failure handler.
            let reported = Mutex<[DistributedNotificationError]>([])
            center.failureHandler = { error in reported.withLock { $0.append(error) } }
            for (what, info, code, path) in cases {
                let before = center.failureCount
                center.postNotificationName(.init("r.bad"), object: nil, userInfo: info)
                #expect(center.failureCount == before + 1, "\(what): not reported")
                guard let error = reported.withLock({ $0.last }) else { continue }
                #expect(error.code == code, "\(what): \(error)")
                if !path.isEmpty { #expect(error.path == path, "\(what): \(error)") }
                #expect(!error.message.isEmpty)
            }
            center.post(name: .init("r.bad"), object: 5)
            let last = reported.withLock { $0.last }
            #expect(last?.code == .notPropertyList && last?.path == "object", "\(String(describing: last))")
            #expect(center.failureCount == cases.count + 1)
            center.postNotificationName(.init("r.ok"), object: nil, userInfo: ["fine": true])
            #expect(try child.waitForExit() == 0)
            #expect(child.stdout.hasPrefix(#"{"name":"r.ok""#), "the first post the watcher saw: \(child.stdout)")
        }

        @Test("20 kinds of hostile payloads from python-dbus are dropped and counted; the process lives on")
        func hostilePayloads() throws {
            let center = try DistributedNotificationCenter(bus: bus.address)
            let seen = Seen()
            let token = center.addObserver(forName: nil, object: nil, suspensionBehavior: .hold) { seen.add($0) }
            defer { center.removeObserver(token) }
            let child = try watcher(["--count", "1"])
            let script = Self.script
            let result = try run("/usr/bin/python3", [script, "hostile", bus.address])
            #expect(result.status == 0, "\(result.err)")
            #expect(result.out.trimmingCharacters(in: .whitespacesAndNewlines) == "20")
            try repeatUntil("the valid post after the hostile ones", action: {}, done: { seen.count >= 1 })
            #expect(seen.names == ["hostile.end"])
            #expect(center.statistics.dropped == 20)
            #expect(try child.waitForExit() == 0)
            #expect(child.stdout.hasPrefix(#"{"name":"hostile.end""#), "\(child.stdout)")
            #expect(child.stderr.contains("distnotify: 20 malformed notifications dropped"), "\(child.stderr)")
        }

        @Test("a python client written from PROTOCOL.md posts to and observes a Swift center")
        func pythonInterop() throws {
            let center = try DistributedNotificationCenter(bus: bus.address)
            let seen = Seen()
            let token = center.addObserver(forName: .init("py.in"), object: "python", suspensionBehavior: .hold) { seen.add($0) }
            defer { center.removeObserver(token) }
            let script = Self.script
            let posted = try run("/usr/bin/python3", [script, "post", bus.address, "py.in"])
            #expect(posted.status == 0, "\(posted.err)")
            try repeatUntil("python's post", action: {}, done: { seen.count == 1 })
            let info = try #require(seen.notes.withLock { $0.first?.userInfo })
            #expect(info["string"] as? String == "héllo")
            #expect(info["int32"] as? Int == -7 && info["int64"] as? Int == 1 << 40)
            #expect(info["byte"] as? Int == 200 && info["uint32"] as? Int == 4_000_000_000)
            #expect(info["double"] as? Double == 2.5 && info["true"] as? Bool == true)
            #expect(info["data"] as? Data == Data([0, 1, 255]))
            #expect(info["date"] as? Date == Date(timeIntervalSince1970: 1_700_000_000.25))
            #expect(info["strings"] as? [String] == ["a", "b"])
            #expect((info["mixed"] as? [Any])?.count == 2 && (info["nested"] as? [String: Any])?["k"] as? String == "v")

            let watcher = try ChildProcess("/usr/bin/python3", [script, "watch", bus.address, "py.out"])
            try watcher.waitForLine("ready")
            center.postNotificationName(.init("py.out"), object: "swift", userInfo: [
                "n": 5, "r": 0.5, "b": false, "s": "x", "d": Data([7]), "t": Date(timeIntervalSince1970: 10), "a": [1, "y"] as [Any],
            ])
            #expect(try watcher.waitForExit() == 0)
            let line = watcher.lines.last ?? ""
            #expect(line == #"{"name": "py.out", "object": "swift", "sequence": 1, "userInfo": {"dict": {"a": {"array": [{"i": 1}, {"s": "y"}]}, "b": {"b": false}, "d": {"data": "07"}, "n": {"i": 5}, "r": {"d": 0.5}, "s": {"s": "x"}, "t": {"date": 10.0}}}}"#,
                    "\(line)")
        }
    }
}

/// A selector-form observer: its method is the "selector".
final class SettingsObserver: Sendable {
    let seen = Mutex<[String]>([])
    func changed(_ note: Notification) { seen.withLock { $0.append(note.object as? String ?? "-") } }
}

/// What a C distributed handler learnt from CNotify_center_current_post.
final class CurrentPostProbe: @unchecked Sendable {
    // @unchecked Sendable: `center` is set once; `reports` is a Mutex.
    let center: OpaquePointer
    let reports = Mutex<[String]>([])
    init(center: OpaquePointer) { self.center = center }
}

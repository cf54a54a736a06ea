import DarwinNotify
import Foundation
import Synchronization
import Testing

/// Distributed notifications from Swift without Foundation (issue 35): `NotifyCenter`'s
/// `observeDistributed` and `postDistributed`, the one wrapper distnotify, the Foundation center and
/// notify-bridge share. The other process is `distnotify`.
extension IntegrationSuites {
    @Suite("Distributed notifications without Foundation", .serialized)
    struct SwiftDistributedTests {
        let bus: TestBus
        init() throws { bus = try TestBus() }

        @Test("a userInfo of Swift values crosses both ways with distnotify; name and object filter; a cancelled observation delivers nothing")
        func acrossProcesses() throws {
            let center = try NotifyCenter(bus: bus.address)
            struct Seen: Sendable { let name: String, object: String?, user: String, immediate: Bool, own: Bool }
            let seen = Mutex<[Seen]>([])
            let observation = try center.observeDistributed("swift.dist", object: "o") { note in
                // The userInfo is read inside the handler, where it lives.
                seen.withLock { $0.append(Seen(name: note.name, object: note.object, user: "\(note.userInfo.map(Self.describe) ?? "none")",
                                               immediate: note.deliverImmediately, own: note.isFromThisCenter)) }
            }
            // From another process: distnotify's JSON becomes the C property list, read as Swift values.
            for (object, info) in [("o", #"{"n":7,"s":"é","l":[true,1.5]}"#), ("other", #"{"n":1}"#)] {
                let result = try run("distnotify", ["post", "--bus", bus.address, "swift.dist", "--object", object, "--user-info", info,
                                                    "--deliver-immediately"])
                #expect(result.status == 0, "\(result.err)")
            }
            try repeatUntil("distnotify's post", action: {}, done: { seen.withLock { $0.count } == 1 })
            let first = try #require(seen.withLock { $0.first })
            #expect(first.name == "swift.dist" && first.object == "o" && first.immediate && !first.own)
            #expect(first.user == "{n=7, s=é, l=[true, 1.5]}", "\(first.user)")
            // To another process: Swift values become the C property list distnotify prints.
            let watcher = try ChildProcess("distnotify", ["watch", "--bus", bus.address, "--json", "--count", "1", "swift.out"])
            try watcher.waitForStderr("distnotify: watching")
            try center.postDistributed("swift.out", object: "x", userInfo: .dictionary([("k", .array([.integer(-1), .string("v")])),
                                                                                           ("d", .data([0, 255]))]))
            #expect(try watcher.waitForExit(timeout: 30) == 0)
            #expect(watcher.stdout.contains(#""name":"swift.out","object":"x","userInfo":{"k":[-1,"v"],"d":{"$data":"AP8="}}"#), "\(watcher.stdout)")
            // A userInfo that is not a dictionary is refused, and nothing is sent.
            #expect(throws: NotifyError.self) { try center.postDistributed("swift.dist", object: "o", userInfo: .string("no")) }
            #expect(throws: NotifyError.self) { try center.postDistributed("swift.dist", object: "o", userInfo: .dictionary([("r", .real(.nan))])) }
            // Own posts are delivered too, marked; after cancel nothing more.
            try center.postDistributed("swift.dist", object: "o", userInfo: nil)
            try repeatUntil("the center's own post", action: {}, done: { seen.withLock { $0.count } == 2 })
            #expect(seen.withLock { $0[1].own && $0[1].user == "none" })
            // A second observation is the handshake: once it saw a later post, the post before
            // it was delivered to every handler there is.
            let later = Mutex(0)
            let witness = try center.observeDistributed(nil) { note in if note.name == "swift.dist.sentinel" { later.withLock { $0 += 1 } } }
            observation.cancel()
            try center.postDistributed("swift.dist", object: "o")
            try center.postDistributed("swift.dist.sentinel")
            try repeatUntil("the sentinel", action: {}, done: { later.withLock { $0 } == 1 })
            #expect(seen.withLock { $0.count } == 2, "delivered after cancel")
            witness.cancel()
        }

        static func describe(_ value: PropertyListValue) -> String {
            switch value {
            case .string(let s): return s
            case .integer(let v): return "\(v)"
            case .real(let v): return "\(v)"
            case .bool(let v): return "\(v)"
            case .data(let bytes): return "\(bytes)"
            case .date(let seconds): return "date \(seconds)"
            case .array(let items): return "[" + items.map(describe).joined(separator: ", ") + "]"
            case .dictionary(let entries): return "{" + entries.map { "\($0.key)=\(describe($0.value))" }.joined(separator: ", ") + "}"
            }
        }
    }
}

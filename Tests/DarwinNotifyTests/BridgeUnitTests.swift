import CNotify
import Foundation
import Synchronization
import NotifyBridge
import Testing

/// notify-bridge's pure logic: topics, payloads, URLs, dedupe, namespaces (docs/BRIDGE.md).
@Suite("Bridge units")
struct BridgeUnitTests {
    @Test("topic escaping: the documented vectors, and every name comes back")
    func topics() {
        let vectors: [(String, String)] = [
            ("com.example.changed", "darwin-notify/com/example/changed"),
            ("a/b", "darwin-notify/a%2Fb"),
            ("plus+hash#", "darwin-notify/plus%2Bhash%23"),
            ("pct%41", "darwin-notify/pct%2541"),
            ("tab\tx", "darwin-notify/tab%09x"),
            ("del\u{7F}", "darwin-notify/del%7F"),
            ("c1\u{85}x", "darwin-notify/c1%C2%85x"),
            ("ünï", "darwin-notify/ünï"),
            ("a..b", "darwin-notify/a//b"),
            ("a b", "darwin-notify/a%20b"),
        ]
        for (name, topic) in vectors {
            #expect(TopicCodec.postTopic(name) == topic, "\(name)")
            #expect(TopicCodec.name(inTopic: topic, root: TopicCodec.postRoot) == name, "\(topic)")
        }
        #expect(TopicCodec.filter(root: TopicCodec.postRoot, namespace: "com.example") == "darwin-notify/com/example/#")
        #expect(TopicCodec.stateTopic("com.x") == "darwin-notify-state/com/x")
        #expect(TopicCodec.level("group.com.example") == "group%2Ecom%2Eexample")
        #expect(TopicCodec.text(fromLevel: "group.com.example") == nil, "a raw dot is not a level's spelling")
        #expect(TopicCodec.text(fromLevel: "a%2Fb") == "a/b")
    }

    @Test("no topic holds a dot or a space: NATS (before 2.10) closes the connection of a client that publishes one (issue 38)")
    func topicsNATSTakes() {
        let texts = ["group.com.example.app", "my settings", "com.example.a b", "a. .b", "ünï.x"]
        for text in texts {
            for topic in [TopicCodec.postTopic(text), TopicCodec.stateTopic(text), TopicCodec.level(text),
                          TopicCodec.filter(root: TopicCodec.postRoot, namespace: text)] {
                #expect(!topic.contains(".") && !topic.contains(" "), "\(text) → \(topic)")
            }
            #expect(TopicCodec.name(inTopic: TopicCodec.postTopic(text), root: TopicCodec.postRoot) == text)
            #expect(TopicCodec.text(fromLevel: Substring(TopicCodec.level(text))) == text)
        }
    }

    @Test("topics that no name makes are refused")
    func badTopics() {
        for levels in ["a%zz", "a%2", "a%2f", "a.b", "a+b", "", "a%FF"] {
            #expect(TopicCodec.name(fromLevels: Substring(levels)) == nil, "\(levels)")
        }
        #expect(TopicCodec.name(inTopic: "other/a", root: TopicCodec.postRoot) == nil)
        #expect(TopicCodec.text(fromLevel: "a/b") == nil)
    }

    @Test("payloads: encode, decode, and what is refused")
    func payloads() throws {
        for body: BridgePayload.Body in [.post, .state(42), .state(.max), .wormhole(Data([0, 10, 255]))] {
            let payload = BridgePayload(origin: "host-1a2b", sequence: 7, body: body)
            #expect(try BridgePayload.decode(payload.encoded()).get() == payload)
        }
        #expect(BridgePayload(origin: "h", sequence: 1, body: .state(5)).encoded() == Array("DNB1 h 1 state 5\n".utf8))
        for bad in ["", "hello", "DNB1 h 1 post", "DNB1 h 0 post\n", "DNB1 h/x 1 post\n", "DNB1 h 1 state x\n",
                    "DNB1 h 1 state -1\n", "DNB1 h 1 post\nextra", "DNB1 h 1 gossip\n", "DNB2 h 1 post\n",
                    "DNB1 h 18446744073709551616 post\n"] {
            #expect(throws: BridgePayload.Fault.self, "\(bad)") { try BridgePayload.decode(Array(bad.utf8)).get() }
        }
    }

    @Test("broker URLs")
    func urls() throws {
        #expect(try BrokerURL(parsing: "mqtt://127.0.0.1") == BrokerURL(host: "127.0.0.1", port: 1883, tls: false))
        #expect(try BrokerURL(parsing: "mqtts://broker.example:8884/") == BrokerURL(host: "broker.example", port: 8884, tls: true))
        #expect(try BrokerURL(parsing: "mqtt://[::1]:1884") == BrokerURL(host: "::1", port: 1884, tls: false))
        for bad in ["127.0.0.1", "http://x", "mqtt://", "mqtt://h:0", "mqtt://h:65536", "mqtt://h:x", "mqtt://u@h",
                    "mqtt://h/path", "mqtt://[::1", "mqtt://h h"] {
            #expect(throws: BrokerURL.Fault.self, "\(bad)") { try BrokerURL(parsing: bad) }
        }
    }

    @Test("several brokers: lists, order, failover at once after a loss, backoff once a whole round failed (issue 38)")
    func brokerRotation() throws {
        let urls = try BridgeArguments.brokerURLs(["mqtt://a:1, mqtt://b:2", "mqtt://c"])
        #expect(urls == [BrokerURL(host: "a", port: 1, tls: false), BrokerURL(host: "b", port: 2, tls: false), BrokerURL(host: "c", port: 1883, tls: false)])
        var rotation = BrokerRotation(urls, order: .inOrder)
        var tried: [String] = []
        var atOnce: [Bool] = []
        // a connects then is lost, b and c fail, a fails (a whole round), then a connects.
        for connected in [true, false, false, false, true] {
            tried.append(rotation.current.host)
            atOnce.append(rotation.advance(connected: connected))
        }
        #expect(tried == ["a", "b", "c", "a", "b"])
        #expect(atOnce == [true, true, true, false, true], "back off only after three failures in a row")
        // One broker: a lost connection is retried after a backoff, as before.
        var single = BrokerRotation([urls[0]], order: .inOrder)
        #expect(!single.advance(connected: true) && !single.advance(connected: false))
        // Random: every broker once per round.
        var random = BrokerRotation(urls, order: .random)
        var round = Set<String>()
        for _ in 0 ..< 3 { round.insert(random.current.host); _ = random.advance(connected: false) }
        #expect(round == ["a", "b", "c"])
    }

    @Test("dedupe: per origin and topic, later sequences only; a forged huge number mutes nothing; the table is bounded")
    func dedupe() {
        var table = Deduplicator(capacity: 2)
        let steps: [(String, String, UInt64, Bool)] = [
            ("a", "t", 1, true), ("a", "t", 1, false), ("a", "t", 3, true), ("a", "t", 2, true) /* late */, ("a", "t", 2, false),
            ("a", "u", 2, true), // another topic has its own floor
            ("b", "t", 1, true) /* forgets a/t */, ("a", "t", 1, true),
        ]
        for (origin, topic, sequence, expected) in steps {
            #expect(table.accept(origin: origin, topic: topic, sequence: sequence) == expected, "\(origin) \(topic) \(sequence)")
        }
        // Issue 19 item 3: one forged message cannot raise the floor of another topic, nor mute its own.
        var bridge = Deduplicator()
        let steps2: [(String, UInt64, Bool)] = [
            ("darwin-notify/com/ex/a", 5, true), ("darwin-notify/com/ex/poison", .max, true),
            ("darwin-notify/com/ex/a", 6, true), ("darwin-notify/com/ex/poison", 7, true), ("darwin-notify/com/ex/poison", 7, false),
        ]
        for (topic, sequence, expected) in steps2 {
            #expect(bridge.accept(origin: "A", topic: topic, sequence: sequence) == expected, "\(topic) \(sequence)")
        }
    }

    @Test("dedupe: a message that arrives after a later one of its topic, never taken before, is taken (issue 38: NATS redelivers late)")
    func dedupeLate() {
        var table = Deduplicator()
        let steps: [(UInt64, Bool)] = [(1, true), (3, true), (2, true) /* never taken: late, not a duplicate */, (2, false), (3, false)]
        for (sequence, expected) in steps {
            #expect(table.accept(origin: "a", topic: "q", sequence: sequence) == expected, "\(sequence)")
        }
        // The verdicts, and what a bounded memory does: past `memory` later ones, a late message
        // can no longer be told from a duplicate and is dropped as one; a jump of 2^20 back is a
        // new numbering.
        var small = Deduplicator(capacity: 8, memory: 4)
        let verdicts: [(UInt64, Deduplicator.Verdict)] = [
            (10, .new), (12, .new), (11, .late), (11, .duplicate), (12, .duplicate), (9, .late),
            (20, .new), (21, .new), (22, .new), (23, .new), // 6 remembered > 4 + 4/8: trimmed to 20…23
            (13, .duplicate) /* older than what is remembered */, (21, .duplicate), (24, .new),
            (24 + Deduplicator.window, .new), (24, .new) /* 2^20 back: a new numbering */, (25, .new),
        ]
        for (sequence, expected) in verdicts {
            #expect(small.check(origin: "o", topic: "t", sequence: sequence) == expected, "\(sequence)")
        }
    }

    @Test("dedupe: a message taken after a later one of its origin on another topic is out of order (counted `reordered`), within one numbering")
    func dedupeReordered() {
        // Issue 38's exporter failover: the exporter's node acknowledged p328…p333 and died before
        // acknowledging p327, which the exporter sent again to the next node, so p327 came after
        // p333. Each is new on its own topic (never `late`), but not in its origin's order.
        var table = Deduplicator()
        let steps: [(String, String, UInt64, Bool)] = [
            ("a", "p1", 1, false), ("a", "p3", 3, false), ("a", "p2", 2, true) /* behind 3 */, ("a", "p4", 4, false),
            ("b", "p1", 1, false) /* another origin's numbering */, ("a", "p5", 5 + Deduplicator.window, false),
            ("a", "p6", 5, false) /* 2^20 back: a new numbering, not out of order */, ("a", "p7", 6, false),
            ("a", "p8", 4, true) /* behind 6 in the new numbering */,
        ]
        for (origin, topic, sequence, expected) in steps {
            let verdict = table.check(origin: origin, topic: topic, sequence: sequence)
            let behind = table.behind(origin: origin, sequence: sequence)
            #expect(verdict == .new, "\(topic)")
            #expect(behind == expected, "\(origin) \(sequence)")
        }
        // Bounded: at most `capacity` origins remembered.
        var small = Deduplicator(capacity: 2)
        for origin in ["x", "y", "z"] {
            let behind = small.behind(origin: origin, sequence: 10)
            #expect(!behind)
        }
        #expect(small.originsRemembered <= 2)
    }

    @Test("dedupe: the sequences remembered in all are bounded; past the budget the oldest pair is forgotten")
    func dedupeBudget() {
        var table = Deduplicator(capacity: 100, memory: 4, budget: 10)
        for (topic, count) in [("k0", 4), ("k1", 3), ("k2", 3)] {
            for sequence in 1 ... UInt64(count) { #expect(table.check(origin: "o", topic: topic, sequence: sequence) == .new) }
        }
        #expect(table.check(origin: "o", topic: "k3", sequence: 1) == .new) // 11 > 10: k0 forgotten
        #expect(table.check(origin: "o", topic: "k0", sequence: 4) == .new, "forgotten: a very late duplicate passes")
        #expect(table.check(origin: "o", topic: "k1", sequence: 3) == .duplicate, "still remembered")
        // A flood of topics from one client stays within the budget (the default: 2^18 sequences).
        var flooded = Deduplicator()
        for topic in 0 ..< 4096 { for sequence in 1 ... 80 { _ = flooded.check(origin: "x", topic: "t\(topic)", sequence: UInt64(sequence)) } }
        #expect(flooded.check(origin: "x", topic: "t4095", sequence: 80) == .duplicate)
    }

    @Test("namespaces: arg0namespace semantics; the minimal set has no overlap")
    func namespaces() {
        #expect(Namespaces.contains("com.x", "com.x") && Namespaces.contains("com.x", "com.x.y"))
        #expect(!Namespaces.contains("com.x", "com.xy") && !Namespaces.contains("com.x", "com"))
        #expect(Namespaces.minimal(["com.x.y", "com.x", "org", "com.x", "com.xy"]) == ["org", "com.x", "com.xy"])
    }

    @Test("the reporter's table of repeated kinds stays bounded under a flood of distinct bad topics")
    func reporterBounded() {
        let lines = Mutex(0)
        let reporter = Reporter { _ in lines.withLock { $0 += 1 } }
        for i in 0 ..< 5000 { reporter.repeated("invalid:darwin-notify/junk/\(i)", "ignored a message on darwin-notify/junk/\(i)") }
        #expect(reporter.trackedKinds <= Reporter.maxKinds)
        // At most maxLinesPerSecond lines a second in all (issue 19 item 9), however many kinds.
        #expect(lines.withLock { $0 } <= 2 * Reporter.maxLinesPerSecond, "\(lines.withLock { $0 })")
        let before = lines.withLock { $0 }
        reporter.flush() // the count of what was held back
        #expect(lines.withLock { $0 } == before + 1)
        reporter.flush()
        #expect(lines.withLock { $0 } == before + 1) // said once
    }

    @Test("CNotify_center_current_post outside a callback is INVALID_REQUEST; restricted names parse as the core does")
    func cHelpers() {
        var status: UInt32 = 0
        let center = CNotify_center_create("unix:path=/nonexistent/bus", &status)
        #expect(center != nil)
        var info = CNotify_post_info()
        #expect(CNotify_center_current_post(center, &info) == UInt32(NOTIFY_STATUS_INVALID_REQUEST))
        #expect(CNotify_center_current_post(center, nil) == UInt32(NOTIFY_STATUS_NULL_INPUT))
        CNotify_center_destroy(center)
        var uid: UInt32 = 9
        #expect(CNotify_name_restricted_uid("com.x", &uid) == 0)
        #expect(CNotify_name_restricted_uid("user.uid.501.x", &uid) == 1 && uid == 501)
        #expect(CNotify_name_restricted_uid("user.uid.99999999999", &uid) == -1)
    }
}

import Foundation
import Testing

/// notify-bridge on a broker cluster (issue 38): a 3-node NATS cluster with MQTT and JetStream,
/// two "hosts" (private dbus-daemons, each with a bridge) on different nodes, and one node killed
/// for good in the middle of a flood of posts, state sets and wormhole queue messages.
extension IntegrationSuites {
    @Suite("notify-bridge on a NATS cluster", .serialized,
           .enabled(if: NatsCluster.available, "nats-server is not installed (apt-get install nats-server)"))
    struct ClusterBridgeTests {
        enum Victim { case importer, exporter }

        @Test("the importer's node killed for good mid-flood: the importer moves to another node by itself; every post, state and queue message the cluster hands out arrives once, and whatever is missing is the cluster's loss")
        func importerNodeDies() throws { try flood(killing: .importer) }

        @Test("the exporter's node killed for good mid-flood: the exporter moves to another node by itself; every post, state and queue message the cluster hands out arrives once, and whatever is missing is the cluster's loss")
        func exporterNodeDies() throws { try flood(killing: .exporter) }

        /// A exports from node 0 (its list: 0, 1, 2), B imports from node 1 (its list: 1, 2, 0).
        private func flood(killing victim: Victim) throws {
            let cluster = try NatsCluster()
            let hostA = try TestBus(), hostB = try TestBus()
            let rootA = try makeTemporaryDirectory("containers-a"), rootB = try makeTemporaryDirectory("containers-b")
            defer { for root in [rootA, rootB] { try? FileManager.default.removeItem(atPath: root) } }
            let onA = hostA.environment.merging(["DARWIN_NOTIFY_CONTAINER_ROOT": rootA]) { $1 }
            let onB = hostB.environment.merging(["DARWIN_NOTIFY_CONTAINER_ROOT": rootB]) { $1 }
            let bridgeA = try ChildProcess("notify-bridge", ["--bus", hostA.address, "--broker", cluster.urls(startingAt: 0), "--client-id", "cluster-a",
                                                             "--export", "com.c", "--wormhole", "group.c"], environment: onA)
            let bridgeB = try ChildProcess("notify-bridge", ["--bus", hostB.address, "--broker", cluster.urls(startingAt: 1), "--client-id", "cluster-b",
                                                             "--import", "com.c", "--wormhole", "group.c"], environment: onB)
            try bridgeA.waitForStderr("ready:", timeout: 60)
            try bridgeB.waitForStderr("ready:", timeout: 60)
            let watchB = try NamespaceWatcher("com.c", on: hostB)
            // The first queue message crossed: both sides' subscriptions are in place.
            #expect(try run("wormhole", ["--transiting", "queue", "pass", "group.c", "jobs", "0"], environment: onA).status == 0)
            try repeatUntil(timeout: 60, "the queue's first message to reach B", action: {}, done: {
                (try? run("wormhole", ["--transiting", "queue", "read", "group.c", "jobs"], environment: onB).out) == "0\n"
            })

            let posts = (1 ... 2000).map { "com.c.p\($0)" }, messages = 200, states = 300
            let poster = try ChildProcess("notifyutil", ["-z", "1"] + posts.flatMap { ["-p", $0] }, environment: hostA.environment)
            let setter = try ChildProcess("notifyutil", ["-z", "5"] + (1 ... states).flatMap { ["-s", "com.c.level", "\($0)", "-p", "com.c.level"] },
                                          environment: hostA.environment)
            let wormhole = ChildProcess.productsDirectory + "/wormhole"
            let passer = try ChildProcess("/bin/bash", ["-c", "for i in $(seq 1 \(messages)); do \(wormhole) --transiting queue pass group.c jobs $i || exit 1; done"],
                                          environment: onA)
            try repeatUntil(timeout: 60, "B to receive part of the flood", action: {}, done: { watchB.names.count >= 400 })
            // The node the victim's bridge is connected to now: its first choice (A: node 0, B:
            // node 1), or the next when that one was not ready yet at its start (seen in CI: B on
            // node 2, so killing node 1 took nothing from it).
            let victimBridge = victim == .importer ? bridgeB : bridgeA
            let connectedLine = victimBridge.stderr.split(separator: "\n").last { $0.contains("connected to the broker at 127.0.0.1:") }
            let port = connectedLine.flatMap { line in
                line.range(of: "127.0.0.1:").flatMap { Int(line[$0.upperBound...].prefix { $0.isNumber }) }
            }
            let killed = try #require(port.flatMap { cluster.mqttPorts.firstIndex(of: $0) }, "\(victimBridge.stderr)")
            try cluster.kill(killed)
            for child in [poster, setter, passer] { #expect(try child.waitForExit(timeout: 120) == 0, "\(child.command): \(child.stderr)") }

            // Everything arrives: a message the dead node had handed out and nobody acknowledged
            // comes again after the cluster's ack_wait (2 s here), possibly after later ones.
            // Waited for without throwing: what is missing is told apart below (the broker's
            // loss or the bridges').
            let expected = Set(posts)
            let allPosts = (try? repeatUntil(timeout: 90, "every post to reach B", action: {}, done: {
                Set(watchB.names.filter { $0.hasPrefix("com.c.p") }).isSuperset(of: expected)
            })) != nil
            let lastState = (try? repeatUntil(timeout: allPosts ? 60 : 5, "B's state to be the last one set", action: {}, done: {
                (try? run("notifyutil", ["-g", "com.c.level"], environment: hostB.environment).out) == "com.c.level \(states)\n"
            })) != nil
            let reader = try ChildProcess("wormhole", ["--transiting", "queue", "listen", "group.c", "jobs", "--name", "checker", "--count", "\(messages + 1)"],
                                          environment: onB)
            let finished = (try? reader.waitForExit(timeout: allPosts ? 90 : 20)) == 0
            if !finished { reader.kill(SIGTERM) }
            // The bridge on the dead node moved to another by itself, and said so.
            let moved = victim == .importer ? bridgeB : bridgeA
            let others = [0, 1, 2].filter { $0 != killed }.map { "connected to the broker at 127.0.0.1:\(cluster.mqttPorts[$0])" }
            let afterLoss = moved.stderr.range(of: "lost the broker").map { String(moved.stderr[$0.upperBound...]) }
            #expect(afterLoss != nil, "\(moved.stderr)")
            #expect(others.contains { afterLoss?.contains($0) == true }, "\(moved.stderr)")
            // Every hand-over counted: nothing dropped, refused or invalid; A's posts all acknowledged.
            for bridge in [bridgeA, bridgeB] { bridge.kill(SIGUSR1) }
            try bridgeA.waitForStderr("stats ")
            try bridgeB.waitForStderr("stats ")
            let statsA = Self.counters(bridgeA.stderr), statsB = Self.counters(bridgeB.stderr)
            print("cluster, \(victim)'s node killed: A \(statsA) B \(statsB)")
            #expect(statsA["dropped"] == 0 && statsB["dropped"] == 0 && statsB["refused"] == 0 && statsB["invalid"] == 0, "A \(statsA) B \(statsB)")
            // Out: everything published was acknowledged by the cluster.
            #expect(statsA["waiting"] == 0 && statsA["acknowledged"] == statsA["exported"]! + statsA["states-exported"]! + statsA["wormhole-exported"]!, "\(statsA)")
            // In: every message received is accounted for by one counter (docs/BRIDGE.md, "Counters").
            let accounted = ["imported", "states-imported", "wormhole-imported", "unchanged", "duplicates", "coalesced",
                             "states-superseded", "states-limited", "refused", "invalid"].reduce(0) { $0 + statsB[$1]! }
            #expect(statsB["received"] == accounted, "\(statsB)")

            // None twice: every post once, every queue message once.
            let seen = watchB.names.filter { $0.hasPrefix("com.c.p") }
            #expect(seen.count == Set(seen).count, "posts seen twice: \(Dictionary(grouping: seen) { $0 }.filter { $0.value.count > 1 }.keys.sorted())")
            #expect(reader.lines.count == Set(reader.lines).count, "\(reader.lines)")
            // None lost by the bridges. The cluster acknowledged every message to A; B's bridge
            // got `received − duplicates` distinct ones (its deduplication is tested on its own:
            // BridgeUnitTests). Fewer is the cluster's loss: nats-server 2.9 loses QoS 1
            // messages of a topic two persistent sessions read (both bridges read the wormhole's),
            // reproduced without the bridges (Tests/Fixtures/nats-two-sessions.sh; docs/BRIDGE.md,
            // "NATS 2.9"). What is missing may be that loss and nothing more.
            let missingPosts = expected.subtracting(seen).sorted()
            let missingQueue = (0 ... messages).map(String.init).filter { !reader.lines.contains($0) }
            let missing = missingPosts.count + missingQueue.count + (lastState ? 0 : 1)
            let brokerLost = Int(statsA["acknowledged"]!) - Int(statsB["received"]! - statsB["duplicates"]!)
            let what = "missing at B: posts \(missingPosts), queue messages \(missingQueue)\(lastState ? "" : ", the last state"); the cluster acknowledged \(statsA["acknowledged"]!) messages from A and handed B \(statsB["received"]! - statsB["duplicates"]!) distinct ones"
            if missing > 0 {
                let stored = (try? WormholeTestSupport.segmentMessages(rootB + "/group.c/wormhole/queues/jobs"))?.messages ?? [:]
                let state = "B's queue holds \(stored.count); B's bridge: \(bridgeB.stderr.suffix(1500))"
                if brokerLost >= missing {
                    withKnownIssue("nats-server 2.9 lost messages it had acknowledged (docs/BRIDGE.md, \"NATS 2.9\")", isIntermittent: true) {
                        Issue.record("\(what): the cluster lost \(brokerLost), the bridges none. \(state)")
                    }
                } else {
                    Issue.record("\(what): the bridges lost \(missing - max(brokerLost, 0)). \(state)")
                }
            }
            // Each queue message stored once; posts of distinct names never coalesced (only the
            // repeated com.c.level may be), and the late ones are counted.
            #expect(statsB["wormhole-imported"] == UInt64(messages + 1 - missingQueue.count), "\(statsB)")
            let carried = statsB["imported"]! + statsB["coalesced"]!, sent = UInt64(posts.count + states)
            #expect(carried <= sent && carried + UInt64(max(brokerLost - missingQueue.count, 0)) >= sent, "\(statsB)")
            // The poster's order holds but for messages counted out of order: a late one (behind a
            // later one of its topic) or a reordered one (behind a later one of another topic: the
            // exporter's node acknowledged later posts and died before an earlier one, sent again).
            var newest = 0, outOfOrder = 0
            for name in seen {
                let number = Int(name.dropFirst("com.c.p".count)) ?? 0
                if number < newest { outOfOrder += 1 } else { newest = number }
            }
            #expect(outOfOrder <= Int(statsB["late"]! + statsB["reordered"]!), "\(outOfOrder) posts out of order, \(statsB)")
        }

        /// The last `stats` line's counters.
        static func counters(_ stderr: String) -> [String: UInt64] {
            guard let line = stderr.split(separator: "\n").last(where: { $0.contains("stats exported=") }),
                  let start = line.range(of: "stats ") else { return [:] }
            var result: [String: UInt64] = [:]
            for field in line[start.upperBound...].split(separator: " ") {
                let parts = field.split(separator: "=")
                if parts.count == 2, let value = UInt64(parts[1]) { result[String(parts[0])] = value }
            }
            return result
        }
    }
}

import Foundation
import Synchronization

/// A private 3-node NATS cluster for one test (issue 38): Debian's nats-server, each node with a
/// client port, a route port and an MQTT listener on 127.0.0.1, sessions and messages in JetStream
/// (replicated to all three). `ackWait` is the MQTT `ack_wait`: how long the cluster waits for an
/// acknowledgement before it hands a message out again (30 s by default; short here, so a test
/// sees a late redelivery within seconds).
final class NatsCluster: Sendable {
    static let executable = ["/usr/sbin/nats-server", "/usr/bin/nats-server"].first { FileManager.default.isExecutableFile(atPath: $0) }
    static var available: Bool { executable != nil }

    let directory: String
    /// Each node's MQTT port, node 0 first.
    let mqttPorts: [Int]
    private let nodes = Mutex<[ChildProcess?]>([])

    init(ackWait: String = "2s") throws {
        guard let executable = NatsCluster.executable else { throw TestFailure("nats-server is not installed") }
        directory = try makeTemporaryDirectory("nats")
        var mqtt: [Int] = [], routes: [Int] = [], clients: [Int] = []
        for _ in 0 ..< 3 {
            mqtt.append(try freeLoopbackPort())
            routes.append(try freeLoopbackPort())
            clients.append(try freeLoopbackPort())
        }
        mqttPorts = mqtt
        let routeList = routes.map { "nats://127.0.0.1:\($0)" }.joined(separator: ", ")
        var started: [ChildProcess?] = []
        for node in 0 ..< 3 {
            let config = directory + "/n\(node).conf"
            try """
            server_name: n\(node)
            listen: 127.0.0.1:\(clients[node])
            jetstream { store_dir: "\(directory)/js\(node)" }
            cluster { name: test, listen: 127.0.0.1:\(routes[node]), routes: [\(routeList)] }
            mqtt { listen: 127.0.0.1:\(mqtt[node]), ack_wait: "\(ackWait)" }
            """.write(toFile: config, atomically: true, encoding: .utf8)
            started.append(try ChildProcess(executable, ["-c", config]))
        }
        nodes.withLock { $0 = started }
        // Ready: every node takes MQTT connections, and the cluster chose its JetStream leader
        // (before that, an MQTT client is refused).
        try repeatUntil(timeout: 30, "the NATS cluster to elect a JetStream leader and listen for MQTT", action: {
            for case let child? in started where !child.isRunning { throw TestFailure("nats-server exited: \(child.stderr.suffix(2000))") }
        }, done: {
            mqtt.allSatisfy { canConnect(port: $0) } && started.contains { $0?.stderr.contains("metadata leader") == true }
        })
    }

    func url(_ node: Int) -> String { "mqtt://127.0.0.1:\(mqttPorts[node])" }

    /// The nodes' URLs, `first` first, then the others in order: one bridge's `--broker` list.
    func urls(startingAt first: Int) -> String {
        (0 ..< 3).map { url(($0 + first) % 3) }.joined(separator: ",")
    }

    /// Kills a node for good (SIGKILL: a crash; it is not started again).
    func kill(_ node: Int) throws {
        guard let child = nodes.withLock({ n -> ChildProcess? in defer { n[node] = nil }; return n[node] }) else { return }
        child.kill(SIGKILL)
        _ = try child.waitForExit(timeout: 10)
    }

    deinit {
        for node in 0 ..< 3 { try? kill(node) }
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// One nats-server with MQTT and JetStream, users and permissions given as its `authorization`
/// block; `reload(authorization:)` rewrites that block and makes the server read it again
/// (SIGHUP), as an administrator changes an ACL under running clients.
final class NatsServer: Sendable {
    let directory: String
    let mqttPort: Int
    private let config: String
    private let clientPort: Int
    private let child: ChildProcess

    init(authorization: String) throws {
        guard let executable = NatsCluster.executable else { throw TestFailure("nats-server is not installed") }
        directory = try makeTemporaryDirectory("nats-solo")
        config = directory + "/solo.conf"
        mqttPort = try freeLoopbackPort()
        clientPort = try freeLoopbackPort()
        try Self.write(authorization, to: config, directory: directory, mqttPort: mqttPort, clientPort: clientPort)
        child = try ChildProcess(executable, ["-c", config])
        try repeatUntil(timeout: 30, "nats-server to listen for MQTT", action: {
            if !child.isRunning { throw TestFailure("nats-server exited: \(child.stderr.suffix(2000))") }
        }, done: { [mqttPort] in canConnect(port: mqttPort) && child.stderr.contains("Server is ready") })
    }

    var url: String { "mqtt://127.0.0.1:\(mqttPort)" }

    private static func write(_ authorization: String, to config: String, directory: String, mqttPort: Int, clientPort: Int) throws {
        try """
        server_name: solo
        listen: 127.0.0.1:\(clientPort)
        jetstream { store_dir: "\(directory)/js" }
        mqtt { listen: 127.0.0.1:\(mqttPort) }
        authorization { \(authorization) }
        """.write(toFile: config, atomically: true, encoding: .utf8)
    }

    /// New permissions, read by the running server; returns once it says it reloaded.
    func reload(authorization: String) throws {
        try Self.write(authorization, to: config, directory: directory, mqttPort: mqttPort, clientPort: clientPort)
        child.kill(SIGHUP)
        try child.waitForStderr("Reloaded: authorization")
    }

    deinit {
        child.kill(SIGKILL)
        _ = try? child.waitForExit(timeout: 10)
        try? FileManager.default.removeItem(atPath: directory)
    }
}

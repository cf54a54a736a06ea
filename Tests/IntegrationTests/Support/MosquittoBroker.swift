import Foundation
import Synchronization

/// A private mosquitto broker for one test, on 127.0.0.1 and a free port (never another address).
/// `kill(_:)` and `start()` take it away and bring it back on the same port.
final class MosquittoBroker: Sendable {
    let directory: String
    let port: Int
    let config: String
    private let daemon = Mutex<ChildProcess?>(nil)

    static let executable = ["/usr/sbin/mosquitto", "/usr/bin/mosquitto"].first { FileManager.default.isExecutableFile(atPath: $0) } ?? "mosquitto"

    /// Started as root, mosquitto would become the `mosquitto` user and lose our temporary
    /// files (`user root` keeps it as it is). `extra` lines go into its configuration (persistence, a password file, a bridge).
    init(extra: String = "", port: Int? = nil, start: Bool = true) throws {
        directory = try makeTemporaryDirectory("broker")
        self.port = try port ?? freeLoopbackPort()
        config = directory + "/mosquitto.conf"
        try """
        listener \(self.port) 127.0.0.1
        allow_anonymous true
        persistence_location \(directory)/
        max_queued_messages 200000
        max_inflight_messages 100
        log_dest stderr
        log_type error
        log_type warning
        \(getuid() == 0 ? "user root" : "")
        \(extra)
        """.write(toFile: config, atomically: true, encoding: .utf8)
        if start { try self.start() }
    }

    var url: String { "mqtt://127.0.0.1:\(port)" }

    /// Starts mosquitto and waits until its port accepts a connection (the readiness handshake).
    func start() throws {
        let child = try ChildProcess(MosquittoBroker.executable, ["-c", config])
        daemon.withLock { $0 = child }
        try repeatUntil("mosquitto to listen on 127.0.0.1:\(port)", action: {
            if !child.isRunning { throw TestFailure("mosquitto exited: \(child.stderr)") }
        }, done: { canConnect(port: port) })
    }

    /// Stops it with `signal` (SIGKILL: a crash; SIGTERM: it saves its state) and waits.
    func kill(_ signal: Int32 = SIGKILL) throws {
        guard let child = daemon.withLock({ d -> ChildProcess? in defer { d = nil }; return d }) else { return }
        child.kill(signal)
        _ = try child.waitForExit(timeout: 10)
    }

    /// Publishes `message` on `topic` with mosquitto_pub (QoS 1), as any client of the broker could.
    func publish(_ topic: String, _ message: String, retain: Bool = false) throws {
        let result = try run("/usr/bin/mosquitto_pub", ["-h", "127.0.0.1", "-p", "\(port)", "-q", "1"] + (retain ? ["-r"] : [])
                             + ["-t", topic, "-m", message])
        if result.status != 0 { throw TestFailure("mosquitto_pub -t \(topic): \(result.err)") }
    }

    deinit {
        try? kill()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// A port on 127.0.0.1 that nothing listens on now (bound, read, released).
func freeLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestFailure("socket: \(errno)") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound else { throw TestFailure("bind: \(errno)") }
    return Int(UInt16(bigEndian: address.sin_port))
}

func canConnect(port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    return withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}

/// A notify-bridge between `bus` and `broker`, once it reports that it is subscribed ("ready").
func startBridge(_ bus: TestBus, _ broker: MosquittoBroker, _ arguments: [String], environment: [String: String] = [:],
                 waitReady: Bool = true) throws -> ChildProcess {
    let child = try ChildProcess("notify-bridge", ["--bus", bus.address, "--broker", broker.url] + arguments,
                                 environment: bus.environment.merging(environment) { $1 })
    if waitReady { try child.waitForStderr("ready:") }
    return child
}

/// A `notifyutil -W namespace` watcher on `bus`, registered: its first line is a sentinel posted
/// on the same bus, which the returned lines leave out.
final class NamespaceWatcher: Sendable {
    let child: ChildProcess

    init(_ namespace: String, on bus: TestBus) throws {
        let child = try ChildProcess("notifyutil", ["-W", namespace], environment: bus.environment)
        try repeatUntil("the watcher of \(namespace) to register", action: {
            try notifyutilPost([namespace + ".watcher-ready"], bus: bus)
        }, done: { !child.lines.isEmpty })
        self.child = child
    }

    /// The names seen, without the readiness sentinels.
    var names: [String] { child.lines.filter { !$0.hasSuffix(".watcher-ready") } }

    func waitFor(_ name: String, timeout: TimeInterval = 30) throws {
        try child.waitForLine(timeout: timeout) { $0 == name }
    }
}

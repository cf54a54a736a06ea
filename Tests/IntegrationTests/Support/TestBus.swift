import CNotify
import DarwinNotify
import Foundation
import Synchronization

/// A private dbus-daemon for one test: never the user's session bus. Its socket lives in a fresh
/// temporary directory; `kill()` and `restart()` let a test take the bus away and bring it back
/// on the same address. Daemons still running when the test process exits are killed then.
final class TestBus: Sendable {
    let directory: String
    let address: String
    private let config: String
    private let daemon = Mutex<ChildProcess?>(nil)

    /// `embeddedLimits`: the embedded bus's limits (4,096 connections of one user) instead of
    /// dbus-daemon's built-in ones (256 connections of one user; 512 rules per connection: the
    /// catch-all test meets it).
    init(embeddedLimits: Bool = false) throws {
        directory = try makeTemporaryDirectory("bus")
        let socket = directory + "/bus"
        address = "unix:path=" + socket
        config = directory + "/bus.conf"
        try EmbeddedBus.configuration(listen: address, embeddedLimits: embeddedLimits).write(toFile: config, atomically: true, encoding: .utf8)
        try start()
    }

    /// Starts dbus-daemon and waits for it to print its address: the readiness handshake.
    func start() throws {
        try? FileManager.default.removeItem(atPath: directory + "/bus")
        let child = try TestBus.startDaemon(config: config)
        daemon.withLock { $0 = child }
    }

    /// Starts dbus-daemon with `config`, waits for it to print its address (the readiness
    /// handshake), and makes sure it dies with the test process.
    ///
    /// The dbus-broker lane (`.ci/broker`) sets DARWIN_NOTIFY_TEST_BROKER_CONTROLLER: then the bus
    /// is dbus-broker, run by that controller (Tests/Fixtures/broker_controller.c) on the
    /// config's `<listen>` path with a policy that allows everything (the controller does not
    /// read the XML policy: the system-like buses' restrictions are dbus-daemon's only).
    static func startDaemon(config: String) throws -> ChildProcess {
        if let controller = ProcessInfo.processInfo.environment["DARWIN_NOTIFY_TEST_BROKER_CONTROLLER"], !controller.isEmpty {
            let text = try String(contentsOfFile: config, encoding: .utf8)
            guard let start = text.range(of: "<listen>unix:path="), let end = text.range(of: "</listen>", range: start.upperBound ..< text.endIndex)
            else { throw TestFailure("no <listen>unix:path=…</listen> in \(config)") }
            let child = try ChildProcess(controller, [String(text[start.upperBound ..< end.lowerBound])])
            try child.waitForLine(timeout: 20) { $0.hasPrefix("unix:") }
            _ = live.withLock { $0.insert(child.pidValue) }
            return child
        }
        let child = try ChildProcess("/usr/bin/dbus-daemon", ["--config-file=\(config)", "--nofork", "--print-address=1", "--nosyslog"])
        try child.waitForLine(timeout: 20) { $0.hasPrefix("unix:") }
        _ = live.withLock { $0.insert(child.pidValue) }
        return child
    }

    /// Kills the daemon (SIGKILL: as abrupt as a crash) and waits until it is gone.
    func kill() throws {
        guard let child = daemon.withLock({ d -> ChildProcess? in defer { d = nil }; return d }) else { return }
        child.kill()
        _ = try child.waitForExit(timeout: 10)
        TestBus.live.withLock { _ = $0.remove(child.pidValue) }
    }

    func restart() throws {
        try kill()
        try start()
    }

    /// The address as the running daemon printed it (`--print-address`): with `,guid=…`, which
    /// pins this instance, as dbus-launch and `dbus-daemon --print-address` give it to users.
    var printedAddress: String {
        daemon.withLock { $0?.lines.first { $0.hasPrefix("unix:") } } ?? address
    }

    /// Sends `signal` to the daemon (SIGSTOP: a bus that takes nothing; SIGCONT: it resumes).
    func signal(_ signal: Int32) {
        daemon.withLock { if let pid = $0?.pidValue { Foundation.kill(pid, signal) } }
    }

    deinit {
        try? kill()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The environment that points our code at this bus.
    /// State lives in the bus's own temporary directory, so tests never share it.
    var environment: [String: String] { ["DARWIN_NOTIFY_BUS": address, "DARWIN_NOTIFY_STATE_DIR": directory + "/state"] }

    private static let live: Mutex<Set<Int32>> = {
        atexit { TestBus.live.withLock { for pid in $0 { Foundation.kill(pid, SIGKILL) } } }
        return Mutex([])
    }()
}

extension ChildProcess {
    var pidValue: Int32 { processIdentifier }
}

func makeTemporaryDirectory(_ tag: String) throws -> String {
    var template = Array((NSTemporaryDirectory() + "darwin-notify-test-\(tag)-XXXXXX").utf8CString)
    guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
        throw TestFailure("mkdtemp failed: \(errno)")
    }
    let path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    _ = madeDirectories.withLock { $0.insert(path) }
    return path
}

/// Every directory a test made, with what a private bus left for it in /tmp (its state
/// directory, named after its address): removed when the test process exits, after the children
/// are gone, so none outlives the suite even when a test failed before its own clean-up.
private let madeDirectories: Mutex<Set<String>> = {
    atexit {
        madeDirectories.withLock { paths in
            var stateDirectories: [String] = []
            let tmp = (try? FileManager.default.contentsOfDirectory(atPath: "/tmp")) ?? []
            for path in paths {
                for address in ["unix:path=\(path)/bus"] {
                    var buffer = [CChar](repeating: 0, count: 4096)
                    if CNotify_state_directory(address, &buffer, buffer.count) == 0 {
                        let base = (String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) as NSString).lastPathComponent
                        stateDirectories += tmp.filter { $0 == base || $0.hasPrefix(base + ".") }.map { "/tmp/" + $0 }
                    }
                }
            }
            for path in paths.union(stateDirectories) { try? FileManager.default.removeItem(atPath: path) }
        }
    }
    return Mutex([])
}()

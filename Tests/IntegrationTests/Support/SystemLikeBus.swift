import DarwinNotify
import Foundation
import Synchronization

/// A private dbus-daemon configured like a distribution's system bus (/usr/share/dbus-1/system.conf:
/// method calls denied, signals allowed, only Hello to the bus driver) plus our policy file, docs/dbus/org.darwinnotify.conf, with a
/// socket and a sticky state directory that other uids can reach. Processes run as root or,
/// through setpriv, as `nobody` (65534).
final class SystemLikeBus: Sendable {
    let directory: String
    let address: String
    private let daemon: Mutex<ChildProcess>
    private let config: String
    /// More variables every client of this bus gets (DARWIN_NOTIFY_CONF for a notify.conf).
    private let extra: [String: String]
    static let nobody: UInt32 = 65534
    /// A third uid, for "someone else's file must not lock a writer out".
    static let third: UInt32 = 1 // "daemon": a uid dbus-daemon knows (it refuses uids with no passwd entry)

    /// `notifyConf`: the text of a notify.conf(5) every client reads (root's, 0644, in the bus's
    /// directory: `confPath`), as they would read /etc/darwin-notify/notify.conf.
    init(notifyConf: String? = nil) throws {
        directory = try makeTemporaryDirectory("sysbus")
        extra = notifyConf == nil ? [:] : ["DARWIN_NOTIFY_CONF": directory + "/notify.conf"]
        if let notifyConf {
            try notifyConf.write(toFile: directory + "/notify.conf", atomically: true, encoding: .utf8)
            chmod(directory + "/notify.conf", 0o644)
        }
        chmod(directory, 0o755)
        address = "unix:path=\(directory)/bus"
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().path
        let policy = root + "/docs/dbus/org.darwinnotify.conf"
        guard FileManager.default.fileExists(atPath: policy) else { throw TestFailure("no policy file at \(policy)") }
        config = directory + "/system.conf"
        // The system bus's stock policy (deny method calls, allow signals), then ours, installed.
        try EmbeddedBus.configuration(listen: address, type: "system", policy: """
          <policy context="default">
            <allow user="*"/>
            <deny own="*"/>
            <deny send_type="method_call"/>
            <allow send_type="signal"/>
            <allow receive_type="signal"/>
            <allow send_requested_reply="true" send_type="method_return"/>
            <allow send_requested_reply="true" send_type="error"/>
            <allow receive_type="method_return"/>
            <allow receive_type="error"/>
            <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus" send_member="Hello"/>
          </policy>
          <include>\(policy)</include>
        """).write(toFile: config, atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: directory + "/state", withIntermediateDirectories: false)
        chmod(directory + "/state", 0o1777)
        daemon = Mutex(try TestBus.startDaemon(config: config))
    }

    deinit {
        daemon.withLock { $0.kill() }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Kills the daemon (as abruptly as a crash) and starts a new one on the same address: a new
    /// instance, which hands out the same unique names (:1.1, …) again.
    func restart() throws {
        try daemon.withLock { child in
            child.kill()
            _ = try child.waitForExit(timeout: 10)
            try? FileManager.default.removeItem(atPath: directory + "/bus")
            child = try TestBus.startDaemon(config: config)
        }
    }

    var confPath: String { directory + "/notify.conf" }

    /// The environment of a client of this bus, root or not.
    var environment: [String: String] {
        ["DARWIN_NOTIFY_BUS": address, "DARWIN_NOTIFY_STATE_DIR": directory + "/state"].merging(extra) { $1 }
    }

    /// Runs a product (or an absolute path) as uid/gid 65534, with no supplementary groups.
    func runAsNobody(_ executable: String, _ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        try runAs(SystemLikeBus.nobody, executable, arguments)
    }

    /// Runs a product (or an absolute path) as `uid` (and the same gid), with no supplementary groups.
    /// With `exactly`, the child's whole environment is that (plus a PATH and HOME), not this
    /// bus's merged into ours; uid 0 then runs it directly.
    func runAs(_ uid: UInt32, _ executable: String, _ arguments: [String], exactly: [String: String]? = nil,
               timeout: TimeInterval = 30) throws -> (status: Int32, out: String, err: String) {
        let path = executable.hasPrefix("/") ? executable : ChildProcess.productsDirectory + "/" + executable
        guard let exactly else {
            return try run("/usr/bin/setpriv", ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "--", path] + arguments,
                           environment: environment.merging(["HOME": "/nonexistent", "XDG_RUNTIME_DIR": ""]) { $1 }, timeout: timeout)
        }
        let argv = uid == 0 ? [path] + arguments : ["/usr/bin/setpriv", "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "--", path] + arguments
        return try run(argv[0], Array(argv.dropFirst()), environment: exactly.merging(["PATH": "/usr/bin:/bin", "HOME": "/nonexistent"]) { $1 },
                       replaceEnvironment: true, timeout: timeout)
    }

    /// Runs as this process's uid (root in CI).
    func runAsRoot(_ executable: String, _ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        try run(executable, arguments, environment: environment)
    }
}

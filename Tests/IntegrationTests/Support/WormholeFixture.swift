import Foundation
import Wormhole
import DarwinNotify

/// A private bus and a fresh container root for one wormhole test, and the `wormhole` CLI bound
/// to both.
final class WormholeFixture: Sendable {
    let bus: TestBus
    let root: String
    let center: NotifyCenter

    init() throws {
        bus = try TestBus()
        root = try makeTemporaryDirectory("containers")
        center = try NotifyCenter(bus: bus.address)
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    /// What child processes need: the bus and the container root.
    var environment: [String: String] { bus.environment.merging(["DARWIN_NOTIFY_CONTAINER_ROOT": root]) { $1 } }

    /// A wormhole in this process, on the fixture's bus and root.
    func wormhole(_ group: String = "group.test", transiting: Transiting = .file,
                  configuration: WormholeConfiguration = WormholeConfiguration()) throws -> Wormhole {
        let container = try GroupContainer(group: group, environment: ["DARWIN_NOTIFY_CONTAINER_ROOT": root])
        return try Wormhole(group: group, transiting: transiting, container: container,
                            configuration: configuration, center: center)
    }

    /// Runs `wormhole ARGS` to completion.
    func cli(_ arguments: [String], timeout: TimeInterval = 30) throws -> (status: Int32, out: String, err: String) {
        try run("wormhole", arguments, environment: environment, timeout: timeout)
    }

    /// How long `wormhole-probe ARGS` (passing one message) takes here from start to exit, the
    /// shorter of two runs and at most 400 ms: longer in a sanitizer build, or on a slow disk.
    /// The crash tests spread their kill points over it and some work after it.
    func probeStartupMilliseconds(_ arguments: [String]) throws -> Int {
        var startup = 400
        for _ in 0..<2 {
            let started = Date()
            let probe = try ChildProcess("wormhole-probe", arguments, environment: environment)
            guard try probe.waitForExit(timeout: 60) == 0 else {
                throw TestFailure("wormhole-probe \(arguments) failed: \(probe.stderr)")
            }
            startup = min(startup, Int(Date().timeIntervalSince(started) * 1000))
        }
        return startup
    }

    /// Runs `wormhole ARGS` and fails unless it exits 0.
    @discardableResult
    func cliOK(_ arguments: [String]) throws -> String {
        let result = try cli(arguments)
        guard result.status == 0 else {
            throw TestFailure("wormhole \(arguments) exited \(result.status): \(result.err)")
        }
        return result.out
    }

    /// Starts `wormhole … listen` and waits until it is registered.
    func listener(_ arguments: [String]) throws -> ChildProcess {
        let child = try ChildProcess("wormhole", arguments, environment: environment)
        try child.waitForStderr("listening for")
        return child
    }
}

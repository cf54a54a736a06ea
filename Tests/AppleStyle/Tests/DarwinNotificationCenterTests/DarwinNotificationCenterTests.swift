// The wrapper's own tests, as an XCTest suite on macOS would have them, with the other process a
// real one: darwin-tool, notify-dispatch, distributed-pair and macos-style, built beside it. The bus
// is the one the environment names (CI: a private dbus-daemon in DARWIN_NOTIFY_BUS); children get
// this process's environment unchanged.
import DarwinNotificationCenter
import Foundation
import XCTest
#if os(Linux)
import DarwinNotifyFoundation
#endif

final class DarwinNotificationCenterTests: XCTestCase {
    private var children: [Child] = []

    override func tearDown() {
        for child in children { child.stop() }
        children = []
        super.tearDown()
    }

    private func start(_ program: String, _ arguments: [String], environment: [String: String] = [:]) throws -> Child {
        let child = try Child(Self.productsDirectory.appendingPathComponent(program).path, arguments, environment: environment)
        children.append(child)
        return child
    }

    private func unique(_ what: String) -> String { "com.example.applestyle.\(what).\(getpid()).\(UUID().uuidString.prefix(8))" }

    func testPostFromAnotherProcessReachesTheObserverOnTheMainThread() throws {
        let name = DarwinNotification.Name(unique("in"))
        let center = DarwinNotificationCenter()
        let arrived = expectation(description: "the post from darwin-tool")
        var onMain = false
        center.addObserver(for: name) { notification in
            XCTAssertEqual(notification.name, name)
            onMain = Thread.isMainThread
            arrived.fulfill()
        }
        let poster = try start("darwin-tool", ["post", name.string])
        wait(for: [arrived], timeout: 30)
        XCTAssertTrue(onMain, "the callback ran off the main thread")
        XCTAssertEqual(poster.waitForExit(), 0)
    }

    func testAnObserverInAnotherProcessGetsEachPost() throws {
        let name = DarwinNotification.Name(unique("out"))
        let observer = try start("darwin-tool", ["observe", name.string, "3"])
        try observer.waitForLine("ready")
        let center = DarwinNotificationCenter()
        // A post a moment before the observer is listening is lost, as on macOS: post until
        // three have been seen, one at a time.
        for seen in 1...3 {
            try observer.repeatUntilLines(seen + 1) { center.post(name) }
        }
        XCTAssertEqual(observer.waitForExit(), 0)
        XCTAssertEqual(Array(observer.lines.prefix(4)), ["ready"] + Array(repeating: "got \(name.string) main=true", count: 3))
    }

    func testRemovedObserverIsNotCalledAgain() throws {
        let removed = DarwinNotification.Name(unique("removed")), sentinel = DarwinNotification.Name(unique("sentinel"))
        let center = DarwinNotificationCenter()
        var removedCalls = 0
        center.addObserver(for: removed) { _ in removedCalls += 1 }
        center.removeObserver(for: removed)
        let arrived = expectation(description: "the sentinel, posted after the removed name")
        center.addObserver(for: sentinel) { _ in arrived.fulfill() }
        XCTAssertEqual(try start("darwin-tool", ["post", removed.string]).waitForExit(), 0)
        XCTAssertEqual(try start("darwin-tool", ["post", sentinel.string]).waitForExit(), 0)
        wait(for: [arrived], timeout: 30)
        XCTAssertEqual(removedCalls, 0)
    }

    func testImportNotifyWithADispatchQueue() throws {
        let name = unique("dispatch")
        let observer = try start("notify-dispatch", ["observe", name, "2"])
        try observer.waitForLine("ready")
        for seen in 1...2 {
            try observer.repeatUntilLines(seen + 1) {
                _ = try? self.start("notify-dispatch", ["post", name]).waitForExit()
            }
        }
        XCTAssertEqual(observer.waitForExit(), 0)
        XCTAssertEqual(Array(observer.lines.prefix(3)), ["ready", "token true main=true", "token true main=true"])
    }

    func testDistributedPairCastsUserInfoAsOnMacOS() throws {
        let observer = try start("distributed-pair", ["observe"])
        try observer.waitForLine("ready")
        XCTAssertEqual(try start("distributed-pair", ["post"]).waitForExit(), 0)
        XCTAssertEqual(observer.waitForExit(), 0, observer.errors)
        XCTAssertEqual(observer.lines, ["ready", "changed main=true count=3.0 ratio=0.5 enabled=1 title=Settings", "done object=prefs"])
    }

    // The CF distributed center: object and userInfo travel; the callback runs on the main thread.
    private static var distributedArrivals: [(main: Bool, object: String?, info: [String: Any]?)] = []
    private static var arrived: XCTestExpectation?

    func testCFDistributedCenterCarriesObjectAndUserInfo() throws {
        let center = CFNotificationCenterGetDistributedCenter()
        let observer = Unmanaged.passUnretained(self).toOpaque()
        Self.arrived = expectation(description: "the distributed post from distributed-pair")
        CFNotificationCenterAddObserver(center, observer, { _, _, _, object, userInfo in
            let text = object.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) }
            DarwinNotificationCenterTests.distributedArrivals.append((Thread.isMainThread, text, userInfo as? [String: Any]))
            DarwinNotificationCenterTests.arrived?.fulfill()
        }, "com.example.applestyle.changed" as CFString, "prefs", .deliverImmediately)
        defer { CFNotificationCenterRemoveEveryObserver(center, observer) }
        XCTAssertEqual(try start("distributed-pair", ["post"]).waitForExit(), 0)
        wait(for: [Self.arrived!], timeout: 30)
        XCTAssertEqual(Self.distributedArrivals.count, 1)
        let first = Self.distributedArrivals[0]
        XCTAssertTrue(first.main)
        XCTAssertEqual(first.object, "prefs")
        XCTAssertEqual(first.info?["count"] as? Int, 3)
        XCTAssertEqual(first.info?["ratio"] as? Double, 0.5)
        XCTAssertEqual(first.info?["enabled"] as? Bool, true)
    }

    // The CF local center: this process, on the posting thread, before the post returns.
    private static var localCalls: [String] = []

    func testCFLocalCenterCallsBackBeforeThePostReturns() {
        let center = CFNotificationCenterGetLocalCenter()
        let observer = Unmanaged.passUnretained(self).toOpaque()
        CFNotificationCenterAddObserver(center, observer, { _, _, name, _, userInfo in
            let value = (userInfo as? [String: Any])?["k"] as? String ?? "-"
            DarwinNotificationCenterTests.localCalls.append("\(name?.rawValue ?? "nil") \(value)")
        }, nil, nil, .deliverImmediately)
        let info: [String: Any] = ["k": "v"]
        CFNotificationCenterPostNotification(center, CFNotificationName("local.one" as CFString), nil, info as CFDictionary, true)
        CFNotificationCenterRemoveObserver(center, observer, nil, nil)
        CFNotificationCenterPostNotification(center, CFNotificationName("local.two" as CFString), nil, nil, true)
        XCTAssertEqual(Self.localCalls, ["local.one v"])
    }

    // MMWormhole: an NSCoding class crosses; archives a listener must refuse are refused unread,
    // the listener lives on and hears the next good message.
    func testMMWormholePairRefusesHostileArchives() throws {
        let listener = try start("wormhole-pair", ["listen", "8"])
        try listener.waitForLine("ready")
        let passes: [(String, [String])] = [
            ("hostile-pass", ["system"]), ("hostile-pass", ["unknown"]), ("hostile-pass", ["cycle"]),
            ("hostile-pass", ["deep"]), ("hostile-pass", ["malformed"]), ("hostile-pass", ["garbage"]),
            ("wormhole-pair", ["pass"]), ("wormhole-pair", ["pass-dictionary"]),
        ]
        for (index, (program, arguments)) in passes.enumerated() {
            XCTAssertEqual(try start(program, arguments).waitForExit(), 0)
            try listener.waitForLineCount(index + 2) // one line heard per pass, in order
        }
        XCTAssertEqual(listener.waitForExit(), 0, listener.errors)
        // The malformed array of allowed classes (index 5) is Foundation's to read: it must not end
        // the listener (swift-corelibs-foundation's default failure policy would), whatever it makes.
        var lines = listener.lines
        if lines.count > 5 { XCTAssertTrue(["nil main=true", "other NSArray main=true"].contains(lines[5]), lines[5]); lines.remove(at: 5) }
        XCTAssertEqual(lines, ["ready"] + Array(repeating: "nil main=true", count: 5)
                       + ["note hello 3 main=true", "dictionary v main=true"])
        for reason in ["Foundation.Process", "hostile_pass.Trap", "refers back to itself", "nest deeper than 256", "not a keyed archive"] {
            XCTAssertTrue(listener.errors.contains(reason), "no refusal for \(reason): \(listener.errors)")
        }
        let reader = try start("wormhole-pair", ["read"])
        XCTAssertEqual(reader.waitForExit(), 0)
        XCTAssertEqual(reader.lines, ["dictionary v", "nil"])
    }

    // DistributedNotificationCenter.default() with no usable bus: the program runs on, nothing is
    // thrown, and each failed call is one line on standard error (NotificationFailures).
    func testDistributedPostWithNoBusIsReportedNotThrown() throws {
        let poster = try start("distributed-pair", ["post"], environment: ["DARWIN_NOTIFY_BUS": "unix:path=/nonexistent/applestyle-bus"])
        XCTAssertEqual(poster.waitForExit(), 0, poster.errors)
        let reports = poster.errors.split(separator: "\n").filter { $0.hasPrefix("DarwinNotify: ") }
        XCTAssertEqual(reports.count, 2, poster.errors) // the change and the "done" post
        XCTAssertTrue(reports.first?.contains("postNotificationName(com.example.applestyle.changed)") == true, poster.errors)
    }

    func testCProgramWithNotifyKeysTakesItsDescriptorPath() throws {
        let program = try start("macos-style", [])
        XCTAssertEqual(program.waitForExit(), 0, program.errors)
        XCTAssertEqual(program.lines, ["clock: descriptor", "ok"])
    }

    /// Where SwiftPM put this bundle's products.
    static var productsDirectory: URL {
        var url = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        while url.path != "/" && !FileManager.default.fileExists(atPath: url.appendingPathComponent("darwin-tool").path) {
            url.deleteLastPathComponent()
        }
        return url
    }
}

/// A child process with its output kept, stopped (its process group) when the test ends.
final class Child: @unchecked Sendable {
    private let process = Process()
    private let lock = NSLock()
    private var output = ""
    private var errorOutput = ""

    init(_ path: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        out.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            self?.lock.withLock { self?.output += String(decoding: data, as: UTF8.self) }
        }
        err.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            self?.lock.withLock { self?.errorOutput += String(decoding: data, as: UTF8.self) }
        }
        try process.run()
    }

    var lines: [String] { lock.withLock { output.split(separator: "\n").map(String.init) } }
    var errors: String { lock.withLock { errorOutput } }

    /// Waits for a line the child prints (its handshake), up to 30 s.
    func waitForLine(_ line: String) throws {
        let deadline = Date().addingTimeInterval(30)
        while !lines.contains(line) {
            if Date() > deadline || !process.isRunning && !lines.contains(line) {
                throw NSError(domain: "Child", code: 1, userInfo: [NSLocalizedDescriptionKey: "no '\(line)' from \(process.executableURL!.lastPathComponent): \(lines) \(errors)"])
            }
            RunLoop.current.run(until: Date().addingTimeInterval(0.01))
        }
    }

    /// Waits until the child has printed `count` lines, up to 30 s.
    func waitForLineCount(_ count: Int) throws {
        let deadline = Date().addingTimeInterval(30)
        while lines.count < count {
            guard Date() < deadline, process.isRunning || lines.count >= count else {
                throw NSError(domain: "Child", code: 3, userInfo: [NSLocalizedDescriptionKey: "\(process.executableURL!.lastPathComponent) printed \(lines), not \(count) lines: \(errors)"])
            }
            RunLoop.current.run(until: Date().addingTimeInterval(0.01))
        }
    }

    /// Runs `action` until the child has printed `count` lines (each run waits up to 2 s for it).
    func repeatUntilLines(_ count: Int, _ action: () throws -> Void) throws {
        let deadline = Date().addingTimeInterval(30)
        while lines.count < count {
            guard Date() < deadline else {
                throw NSError(domain: "Child", code: 2, userInfo: [NSLocalizedDescriptionKey: "\(process.executableURL!.lastPathComponent) printed \(lines), not \(count) lines"])
            }
            try action()
            let wait = Date().addingTimeInterval(2)
            while lines.count < count && Date() < wait { RunLoop.current.run(until: Date().addingTimeInterval(0.01)) }
        }
    }

    /// The exit status, waiting up to 30 s (then the child is stopped and -1 returned).
    func waitForExit() -> Int32 {
        let deadline = Date().addingTimeInterval(30)
        while process.isRunning && Date() < deadline { RunLoop.current.run(until: Date().addingTimeInterval(0.01)) }
        if process.isRunning { stop(); return -1 }
        process.waitUntilExit()
        return process.terminationStatus
    }

    func stop() {
        if process.isRunning {
            kill(-process.processIdentifier, SIGKILL)
            process.terminate()
        }
        process.waitUntilExit()
    }
}

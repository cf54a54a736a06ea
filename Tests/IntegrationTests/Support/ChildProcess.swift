import Foundation
import Synchronization

/// A child process whose stdout and stderr are read as they arrive (never left to fill a pipe),
/// so a test can wait for a line — the readiness handshake — before acting.
final class ChildProcess: Sendable {
    private struct Output { var out = "", err = "", eofs = 0 }
    /// A class around the lock, so the pipe readers can capture it.
    private final class Buffer: Sendable {
        let state = Mutex(Output())
        func withLock<R>(_ body: (inout Output) -> R) -> R { state.withLock { body(&$0) } }
    }
    private let process: Process
    private let output = Buffer()
    private let arrived = DispatchSemaphore(value: 0)
    private let stdinPipe: Pipe?
    let command: String

    /// Starts `executable`: a path, or the name of a product built next to the test binary.
    init(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
         replaceEnvironment: Bool = false, stdin: Bool = false) throws {
        let process = Process()
        let path = executable.hasPrefix("/") ? executable : ChildProcess.productsDirectory + "/" + executable
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        var env = replaceEnvironment ? [:] : ProcessInfo.processInfo.environment
        env.merge(environment) { $1 }
        process.environment = env
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        stdinPipe = stdin ? Pipe() : nil
        process.standardInput = stdinPipe ?? FileHandle.nullDevice
        self.process = process
        self.command = ([executable] + arguments).joined(separator: " ")
        for (pipe, isOut) in [(out, true), (err, false)] {
            // A blocking reader thread per pipe: Foundation's readabilityHandler can miss the end
            // of file when the last bytes and the hang-up arrive together.
            let handle = pipe.fileHandleForReading
            let reader = Thread { [output, arrived] in
                while true {
                    let data = handle.availableData
                    output.withLock {
                        if data.isEmpty { $0.eofs += 1 }
                        else if isOut { $0.out += String(decoding: data, as: UTF8.self) }
                        else { $0.err += String(decoding: data, as: UTF8.self) }
                    }
                    arrived.signal()
                    if data.isEmpty { break }
                }
                try? handle.close()
            }
            reader.start()
        }
        process.terminationHandler = { [arrived] _ in arrived.signal() }
        try CleanSpawner.shared.run(process)
        // Foundation starts each child in a process group of its own (pgid = pid): killing the
        // group stops what it started too (a pasted shell line's notifyutil, setpriv's target).
        ChildProcess.groups.withLock { _ = $0.insert(process.processIdentifier) }
    }

    /// Every process group a test started: at the end of the test process each is killed, so
    /// nothing of ours outlives the suite even when a test failed half-way. (A pid stays reserved
    /// while its group has members, so the number names our group, not a stranger's.)
    /// A sanitizer's report ends the process without running atexit (seen: a dbus-daemon of the
    /// restart test outlived an AddressSanitizer abort), so its death callback stops them too.
    private static let groups: Mutex<Set<Int32>> = {
        atexit { ChildProcess.killGroups() }
        if let setter = dlsym(nil, "__sanitizer_set_death_callback") {
            typealias SetDeathCallback = @convention(c) (@convention(c) () -> Void) -> Void
            unsafeBitCast(setter, to: SetDeathCallback.self)({ ChildProcess.killGroups() })
        }
        return Mutex([])
    }()

    private static func killGroups() { groups.withLock { for pgid in $0 { Foundation.kill(-pgid, SIGKILL) } } }

    /// The directory holding the package's built executables (the test binary's own).
    static let productsDirectory: String = {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: exe).deletingLastPathComponent().path
    }()

    var stdout: String { output.withLock { $0.out } }
    var stderr: String { output.withLock { $0.err } }
    var lines: [String] { stdout.split(separator: "\n").map(String.init) }
    var isRunning: Bool { process.isRunning }
    var processIdentifier: Int32 { process.processIdentifier }

    /// Waits until stdout holds a line satisfying `predicate`; fails loudly after `timeout`.
    @discardableResult
    func waitForLine(timeout: TimeInterval = 20, _ predicate: (String) -> Bool) throws -> String {
        var found: String?
        try waitUntil(timeout: timeout, "the expected line") {
            found = lines.first(where: predicate)
            return found != nil
        }
        return found!
    }

    /// Waits until stderr contains `text` (readiness lines of tools whose stdout is data).
    func waitForStderr(_ text: String, timeout: TimeInterval = 20) throws {
        try waitUntil(timeout: timeout, "'\(text)' on stderr") { stderr.contains(text) }
    }

    /// Waits until stdout holds at least `count` lines.
    func waitForLines(_ count: Int, timeout: TimeInterval = 60) throws {
        try waitUntil(timeout: timeout, "\(count) lines on stdout") { stdout.utf8.lazy.filter { $0 == 0x0a }.count >= count }
    }

    private func waitUntil(timeout: TimeInterval, _ what: String, _ done: () -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while !done() {
            // Both pipes at their end: the last lines came with it, maybe after `done` looked.
            if output.withLock({ $0.eofs == 2 }) && !done() {
                throw TestFailure("\(command) closed its output before \(what); stdout: \(stdout.suffix(2000)) stderr: \(stderr.suffix(2000))")
            }
            if Date() > deadline {
                throw TestFailure("timed out after \(timeout) s waiting for \(what) from \(command); stdout: \(stdout.suffix(2000)) stderr: \(stderr.suffix(2000))")
            }
            _ = arrived.wait(timeout: .now() + 0.5)
        }
    }

    func waitForLine(_ exact: String, timeout: TimeInterval = 20) throws {
        try waitForLine(timeout: timeout) { $0 == exact }
    }

    /// Waits for exit and for both pipes to reach end of file; kills and fails loudly after `timeout`.
    func waitForExit(timeout: TimeInterval = 30) throws -> Int32 {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning || output.withLock({ $0.eofs < 2 }) {
            if Date() > deadline {
                kill()
                throw TestFailure("\(command) did not finish within \(timeout) s; stdout: \(stdout) stderr: \(stderr)")
            }
            _ = arrived.wait(timeout: .now() + 0.2)
        }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Whether the child has exited, waiting at most `timeout`.
    func exits(within timeout: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { _ = arrived.wait(timeout: .now() + 0.05) }
        return !process.isRunning
    }

    func write(_ text: String) throws {
        guard let stdinPipe else { throw TestFailure("\(command) was started without a stdin pipe") }
        try stdinPipe.fileHandleForWriting.write(contentsOf: Data(text.utf8))
    }

    func closeStdin() { stdinPipe?.fileHandleForWriting.closeFile() }

    /// Sends `signal` to the child; SIGKILL goes to its whole process group (what it started too).
    func kill(_ signal: Int32 = SIGKILL) {
        guard process.isRunning else { return }
        Foundation.kill(signal == SIGKILL ? -process.processIdentifier : process.processIdentifier, signal)
    }

    deinit {
        // The child may be gone while what it started (a shell's background job) is not.
        Foundation.kill(-process.processIdentifier, SIGKILL)
        if process.isRunning { Foundation.kill(process.processIdentifier, SIGKILL) }
    }
}

/// Runs a command to completion: (status, stdout, stderr).
func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
         replaceEnvironment: Bool = false, timeout: TimeInterval = 30) throws -> (status: Int32, out: String, err: String) {
    let child = try ChildProcess(executable, arguments, environment: environment, replaceEnvironment: replaceEnvironment)
    let status = try child.waitForExit(timeout: timeout)
    return (status, child.stdout, child.stderr)
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Starts children from a thread of its own whose signal mask is empty, so each child starts as
/// from a shell: nothing blocked, SIGPIPE and SIGTERM with their default actions. (A child
/// inherits the spawning thread's mask, and the test runner's threads block nearly every signal:
/// `SigBlk fffffffe3bfbea27`, SIGPIPE, SIGTERM and SIGIO included. That hid a SIGPIPE that killed
/// a program using notify_register_file_descriptor: CProgramTests.closedTokenDescriptor.) Only
/// `posix_spawn` runs there; no signal is sent to this process by the tests, so the empty mask
/// lets nothing new in.
final class CleanSpawner: Sendable {
    static let shared = CleanSpawner()

    /// `failure` is written on the spawner's thread before `done` is signalled, and read after.
    private final class Job: @unchecked Sendable {
        let process: Process
        let done = DispatchSemaphore(value: 0)
        var failure: (any Error)?
        init(_ process: Process) { self.process = process }
    }
    private let jobs = Mutex<[Job]>([])
    private let waiting = DispatchSemaphore(value: 0)

    private init() {
        let thread = Thread { [self] in
            var none = sigset_t()
            sigemptyset(&none)
            pthread_sigmask(SIG_SETMASK, &none, nil)
            while true {
                waiting.wait()
                guard let job = jobs.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { continue }
                do { try job.process.run() } catch { job.failure = error }
                job.done.signal()
            }
        }
        thread.name = "test child spawner"
        thread.start()
    }

    /// `process.run()` on the spawner's thread; returns once the child started (or throws why not).
    func run(_ process: Process) throws {
        let job = Job(process)
        jobs.withLock { $0.append(job) }
        waiting.signal()
        job.done.wait()
        if let error = job.failure { throw error }
    }
}

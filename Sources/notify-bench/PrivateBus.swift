import DarwinNotify
import Foundation

/// A private dbus-daemon for one benchmark run, so nothing else on the machine shares its bus.
final class PrivateBus {
    let address: String
    private let daemon: Process
    private let directory: String

    init() throws {
        // Unique per bus: the bridge suite runs two in one process.
        directory = NSTemporaryDirectory() + "notify-bench-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let config = directory + "/bus.conf"
        try EmbeddedBus.configuration(listen: "unix:path=\(directory)/bus", embeddedLimits: true)
            .write(toFile: config, atomically: true, encoding: .utf8)
        let child = try Child("/usr/bin/dbus-daemon", ["--config-file=\(config)", "--nofork", "--print-address=1", "--nosyslog"])
        address = try child.readLine { $0.hasPrefix("unix:") }
        daemon = child.process
    }

    /// The daemon's pid (whose CPU time the peers suite counts).
    var pid: Int32 { daemon.processIdentifier }

    func stop() {
        Foundation.kill(daemon.processIdentifier, SIGKILL) // SIGTERM may be blocked: see Child.stop()
        daemon.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// A child process of the benchmark: readiness by a line on stdout, stopped by closing stdin.
final class Child {
    let process = Process()
    private let stdoutPipe = Pipe()
    private let stdinPipe = Pipe()
    private var buffer = Data()

    /// `quiet`: its standard error to /dev/null (a daemon that logs every step).
    init(_ path: String, _ arguments: [String], environment: [String: String] = [:], quiet: Bool = false) throws {
        if quiet { process.standardError = FileHandle.nullDevice }
        process.executableURL = URL(fileURLWithPath: path.hasPrefix("/") ? path : Child.siblings + "/" + path)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = stdoutPipe
        process.standardInput = stdinPipe
        try process.run()
    }

    /// The directory of the benchmark's own executable, where the package's products are built.
    static let siblings: String = {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: exe).deletingLastPathComponent().path
    }()

    /// Reads stdout until a line satisfies `predicate` (blocking reads: the child prints it once ready).
    func readLine(_ predicate: (String) -> Bool) throws -> String {
        while true {
            while let nl = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<nl], as: UTF8.self)
                buffer.removeSubrange(...nl)
                if predicate(line) { return line }
            }
            let data = stdoutPipe.fileHandleForReading.availableData
            if data.isEmpty { throw BenchError("\(process.executableURL!.lastPathComponent) ended before it was ready") }
            buffer.append(data)
        }
    }

    /// Everything the child prints until it exits.
    func readToEnd() throws -> String {
        let rest = stdoutPipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw BenchError("\(process.executableURL!.lastPathComponent) exited with \(process.terminationStatus)")
        }
        return String(decoding: buffer + rest, as: UTF8.self)
    }

    var pid: Int32 { process.processIdentifier }

    /// Kills the child at once (SIGKILL) and reaps it.
    func kill() {
        if process.isRunning { Foundation.kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    /// Closes stdin (our children exit on end of file), then SIGKILLs a child still running after
    /// 2 s: children spawned from dispatch threads inherit a mask that blocks SIGTERM.
    func stop() {
        try? stdinPipe.fileHandleForWriting.close()
        for _ in 0..<200 where process.isRunning { usleep(10_000) }
        if process.isRunning { Foundation.kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

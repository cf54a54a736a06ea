// NotificationFailures.swift: where the calls that cannot fail on Apple platforms report what
// failed here. CF's notification functions return nothing; DistributedNotificationCenter's post
// and addObserver throw nothing. On Linux a bus can be missing or a name refused: that is never
// thrown, never a crash, and never silent.
import Foundation
import Synchronization

/// Failures of calls that return nothing on Apple platforms (the `CFNotificationCenter…`
/// functions, and ``DistributedNotificationCenter``'s posts and registrations when the center has
/// no ``DistributedNotificationCenter/failureHandler``). By default each is one line on standard
/// error; ``handler`` replaces that, and ``count`` counts them all.
public enum NotificationFailures {
    /// One failure: the function, the notification name if any, and why.
    public struct Report: Sendable, CustomStringConvertible {
        public let function: String
        public let name: String?
        public let reason: String
        public var description: String {
            "DarwinNotify: \(function)\(name.map { "(\($0))" } ?? ""): \(reason)"
        }
    }

    private struct State {
        var handler: (@Sendable (Report) -> Void)?
        var count = 0
    }
    private static let state = Mutex(State())

    /// Called with each failure instead of the line on standard error; nil restores the line.
    public static var handler: (@Sendable (Report) -> Void)? {
        get { state.withLock { $0.handler } }
        set { state.withLock { $0.handler = newValue } }
    }

    /// How many failures were reported in this process.
    public static var count: Int { state.withLock { $0.count } }

    package static func report(_ function: String, name: String?, _ reason: any Error) {
        report(function, name: name, "\(reason)")
    }

    package static func report(_ function: String, name: String?, _ reason: String) {
        let report = Report(function: function, name: name, reason: reason)
        let handler = state.withLock { s -> (@Sendable (Report) -> Void)? in
            s.count += 1
            return s.handler
        }
        if let handler { handler(report) } else { FileHandle.standardError.write(Data((report.description + "\n").utf8)) }
    }
}

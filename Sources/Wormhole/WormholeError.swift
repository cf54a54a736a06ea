// WormholeError.swift: every failure of a wormhole.
import DarwinNotify
import SystemPackage

/// Every failure of a wormhole: a named code (as swift-system's `Errno`), a sentence that says
/// what happened to which file or identifier, so the user can act on it, and the underlying
/// system or notification error, typed, when there is one.
public struct WormholeError: Error, Equatable, Sendable, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }

        /// A group identifier that is empty, too long or has characters outside `[A-Za-z0-9._-]`.
        public static let invalidGroup = Code(rawValue: 1)
        /// A message identifier (or directory name) that is empty, too long, or has `/`, `..`,
        /// NUL, a control character or a leading `.`.
        public static let invalidIdentifier = Code(rawValue: 2)
        /// The container is a symlink, not a directory, owned by another user or writable by
        /// others; or no place for containers is configured.
        public static let unsafeContainer = Code(rawValue: 3)
        /// A payload over the wormhole's limit; nothing was written.
        public static let payloadTooLarge = Code(rawValue: 4)
        /// Text given as JSON that does not parse.
        public static let invalidJSON = Code(rawValue: 5)
        /// A message file that is truncated, garbage or not a wormhole message. It was moved to
        /// the quarantine folder (`quarantinedPath`).
        public static let corruptMessage = Code(rawValue: 6)
        /// A well-formed message whose payload does not decode as the requested type. The message
        /// is left in place: another reader may expect that type.
        public static let decodingFailed = Code(rawValue: 7)
        /// The value could not be encoded as JSON; or `update`'s closure threw (nothing was
        /// written; the closure's error is in the message).
        public static let encodingFailed = Code(rawValue: 8)
        /// The file system is full (or over quota); the previous message is intact.
        public static let diskFull = Code(rawValue: 9)
        /// A queue is at its count or byte limit and its overflow policy is `.reject`.
        public static let queueFull = Code(rawValue: 10)
        /// Queue messages this listener had not read were removed by retention (age or
        /// `.dropOldest`); reported once, then delivery continues after the gap.
        public static let messagesLost = Code(rawValue: 11)
        /// A listener name that is already listening in this process.
        public static let listenerBusy = Code(rawValue: 12)
        /// Another system call failed (``WormholeError/underlying`` holds the `Errno`).
        public static let io = Code(rawValue: 13)
        /// The notification center failed (``WormholeError/underlying`` holds the `NotifyError`).
        public static let notification = Code(rawValue: 14)
        /// An operation this wormhole's transiting does not offer (`update` without
        /// `.coordinated`, a listener name without `.queue`).
        public static let unsupported = Code(rawValue: 15)
        /// A named listener's cursor could not be believed: not 8 bytes, past the queue's end, or
        /// a file it may not open (someone else in the group changed it). Reported once; the
        /// listener resumes at the oldest message kept, so messages may come again, none is lost.
        public static let damagedCursor = Code(rawValue: 16)

        private static let names: [Int: String] = [
            1: "invalidGroup", 2: "invalidIdentifier", 3: "unsafeContainer", 4: "payloadTooLarge", 5: "invalidJSON",
            6: "corruptMessage", 7: "decodingFailed", 8: "encodingFailed", 9: "diskFull", 10: "queueFull",
            11: "messagesLost", 12: "listenerBusy", 13: "io", 14: "notification", 15: "unsupported",
            16: "damagedCursor",
        ]

        /// The code's name, as in source (`corruptMessage`).
        public var description: String { Code.names[rawValue] ?? "code \(rawValue)" }
    }

    /// The error beneath a wormhole failure, kept typed so a caller can switch on it.
    public enum Underlying: Equatable, Sendable {
        /// A system call failed with this `errno`.
        case errno(Errno)
        /// The notification center failed.
        case notify(NotifyError)
    }

    public let code: Code
    public let message: String
    /// Where a corrupt message file was moved, for `.corruptMessage`.
    public let quarantinedPath: String?
    /// The system or notification error beneath `.io`, `.diskFull` and `.notification`.
    public let underlying: Underlying?

    public init(_ code: Code, _ message: String, quarantinedPath: String? = nil, underlying: Underlying? = nil) {
        self.code = code
        self.message = message
        self.quarantinedPath = quarantinedPath
        self.underlying = underlying
    }

    /// "code: message", as `NotifyError` prints.
    public var description: String { "\(code): \(message)" }

    static func io(_ what: String, _ errno: Errno) -> WormholeError {
        switch errno {
        case .noSpace, .diskQuotaExceeded, .fileTooLarge:
            return WormholeError(.diskFull, "\(what): \(errno) (no space left; the previous message is intact)", underlying: .errno(errno))
        default:
            return WormholeError(.io, "\(what): \(errno)", underlying: .errno(errno))
        }
    }

    static func notification(_ error: NotifyError, _ what: String = "notification center") -> WormholeError {
        WormholeError(.notification, "\(what): \(error)", underlying: .notify(error))
    }
}

import DarwinNotify
import SystemPackage

/// Every failure of a wormhole: a named code (as swift-system's `Errno`) and a sentence that says
/// what happened to which file or identifier, so the user can act on it.
public struct WormholeError: Error, Equatable, Sendable, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }

        /// A group identifier that is empty, too long or has characters outside `[A-Za-z0-9._-]`.
        public static let invalidGroup = Code(rawValue: 1)
        /// A message identifier (or directory name) that is empty, too long, or has `/`, `..`,
        /// NUL, a control character or a leading `.`.
        public static let invalidIdentifier = Code(rawValue: 2)
        /// The container is a symlink, not a directory, owned by another user or writable by others.
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
        /// The value could not be encoded as JSON.
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
        /// An operation this wormhole's transiting does not offer (`update` without
        /// `.coordinated`, a listener name without `.queue`).
        public static let unsupported = Code(rawValue: 15)
        /// Another system call failed (`errno` is in the message).
        public static let io = Code(rawValue: 13)
        /// The notification center failed (the `NotifyError` is in the message).
        public static let notification = Code(rawValue: 14)
    }

    public let code: Code
    public let message: String
    /// Where a corrupt message file was moved, for `.corruptMessage`.
    public let quarantinedPath: String?

    public init(_ code: Code, _ message: String, quarantinedPath: String? = nil) {
        self.code = code
        self.message = message
        self.quarantinedPath = quarantinedPath
    }

    public var description: String { message }

    static func io(_ what: String, _ errno: Errno) -> WormholeError {
        switch errno {
        case .noSpace, .diskQuotaExceeded, .fileTooLarge:
            return WormholeError(.diskFull, "\(what): \(errno) (no space left; the previous message is intact)")
        default:
            return WormholeError(.io, "\(what): \(errno)")
        }
    }

    static func notification(_ error: any Error) -> WormholeError {
        WormholeError(.notification, "notification center: \(error)")
    }
}

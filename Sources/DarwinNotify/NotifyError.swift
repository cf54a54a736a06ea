// NotifyError.swift: the error every DarwinNotify call throws.
import CNotify

/// An error from the notification center: one of Apple's `NOTIFY_STATUS_*` codes, plus a
/// sentence from the C core (`CNotify_last_error`) that says what went wrong and what to do.
public struct NotifyError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A `NOTIFY_STATUS_*` status code from `<notify.h>`, with Apple's values (as swift-system's
    /// `Errno` wraps `errno`).
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        private init(_ status: Int32) { rawValue = UInt32(status) }

        /// `NOTIFY_STATUS_INVALID_NAME`: a name that is empty, longer than 512 bytes or not UTF-8,
        /// or a namespace D-Bus cannot match on.
        public static let invalidName = Code(NOTIFY_STATUS_INVALID_NAME)
        /// `NOTIFY_STATUS_INVALID_TOKEN`: a token or registration never made, or already cancelled
        /// (also every token of a destroyed center).
        public static let invalidToken = Code(NOTIFY_STATUS_INVALID_TOKEN)
        /// `NOTIFY_STATUS_INVALID_PORT`: Mach ports do not exist on Linux; never returned here.
        public static let invalidPort = Code(NOTIFY_STATUS_INVALID_PORT)
        /// `NOTIFY_STATUS_INVALID_FILE`: `NOTIFY_REUSE` with a descriptor notify did not hand out.
        public static let invalidFile = Code(NOTIFY_STATUS_INVALID_FILE)
        /// `NOTIFY_STATUS_INVALID_SIGNAL`: a number that is not a signal.
        public static let invalidSignal = Code(NOTIFY_STATUS_INVALID_SIGNAL)
        /// `NOTIFY_STATUS_INVALID_REQUEST`: a call that makes no sense now (`readPosts` on a
        /// token without a descriptor, a buffer too small).
        public static let invalidRequest = Code(NOTIFY_STATUS_INVALID_REQUEST)
        /// `NOTIFY_STATUS_NOT_AUTHORIZED`: another user's `user.uid.N` name, or a state file this
        /// user may not write.
        public static let notAuthorized = Code(NOTIFY_STATUS_NOT_AUTHORIZED)
        /// `NOTIFY_STATUS_OPT_DISABLE`: this process was forked from one that used notifications;
        /// they are off in the child until it execs.
        public static let optionDisabled = Code(NOTIFY_STATUS_OPT_DISABLE)
        /// `NOTIFY_STATUS_SERVER_NOT_FOUND`: no bus could be reached, or the bus setting is wrong.
        public static let serverNotFound = Code(NOTIFY_STATUS_SERVER_NOT_FOUND)
        /// `NOTIFY_STATUS_NULL_INPUT`: a required argument was missing.
        public static let nullInput = Code(NOTIFY_STATUS_NULL_INPUT)
        /// `NOTIFY_STATUS_FAILED`: anything else (out of memory, a stalled bus, a file error); the
        /// message says which.
        public static let failed = Code(NOTIFY_STATUS_FAILED)

        /// Apple's name for the status, as `notifyutil` prints it (`CNotify_status_string`).
        public var description: String { String(cString: CNotify_status_string(rawValue)) }
    }

    public let code: Code
    /// What the C core said about this failure.
    public let message: String

    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String {
        message.isEmpty ? code.description : "\(code.description): \(message)"
    }

    /// The error for a `CNotify_*` constructor that returned NULL: INVALID_REQUEST with the
    /// sentence the C core left on this thread (`fallback` when it left none).
    static func lastError(default fallback: String) -> NotifyError {
        let said = String(cString: CNotify_last_error())
        return NotifyError(code: .invalidRequest, message: said.isEmpty ? fallback : said)
    }

    /// Throws the error for a non-OK status returned by a `CNotify_*` or `notify_*` call, with
    /// the sentence the C core left for it on this thread.
    static func check(_ status: UInt32) throws(NotifyError) {
        guard status != UInt32(NOTIFY_STATUS_OK) else { return }
        throw NotifyError(code: Code(rawValue: status), message: String(cString: CNotify_last_error()))
    }
}

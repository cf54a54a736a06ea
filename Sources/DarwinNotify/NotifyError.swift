import CNotify

/// An error from the notification center: one of Apple's `NOTIFY_STATUS_*` codes, plus a
/// sentence from the C core (`CNotify_last_error`) that says what went wrong and what to do.
public struct NotifyError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A `NOTIFY_STATUS_*` status code, with Apple's values.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }

        /// `NOTIFY_STATUS_INVALID_NAME`: empty, longer than 512 bytes, or not UTF-8.
        public static let invalidName = Code(rawValue: 1)
        /// `NOTIFY_STATUS_INVALID_TOKEN`: never registered, or already cancelled.
        public static let invalidToken = Code(rawValue: 2)
        /// `NOTIFY_STATUS_INVALID_PORT`.
        public static let invalidPort = Code(rawValue: 3)
        /// `NOTIFY_STATUS_INVALID_FILE`: a descriptor notify did not hand out.
        public static let invalidFile = Code(rawValue: 4)
        /// `NOTIFY_STATUS_INVALID_SIGNAL`.
        public static let invalidSignal = Code(rawValue: 5)
        /// `NOTIFY_STATUS_INVALID_REQUEST`.
        public static let invalidRequest = Code(rawValue: 6)
        /// `NOTIFY_STATUS_NOT_AUTHORIZED`.
        public static let notAuthorized = Code(rawValue: 7)
        /// `NOTIFY_STATUS_OPT_DISABLE`.
        public static let optionDisabled = Code(rawValue: 8)
        /// `NOTIFY_STATUS_SERVER_NOT_FOUND`: no bus could be reached, or the bus setting is wrong.
        public static let serverNotFound = Code(rawValue: 9)
        /// `NOTIFY_STATUS_NULL_INPUT`.
        public static let nullInput = Code(rawValue: 10)
        /// `NOTIFY_STATUS_FAILED`.
        public static let failed = Code(rawValue: 1_000_000)

        /// Apple's name for the status, as `notifyutil` prints it.
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

    /// Throws the error for a non-OK status returned by a `CNotify_*` or `notify_*` call.
    static func check(_ status: UInt32) throws {
        guard status != 0 else { return }
        throw NotifyError(code: Code(rawValue: status), message: String(cString: CNotify_last_error()))
    }
}

import FoundationEssentials
import Glibc

/// A message read from a wormhole.
public struct WormholeMessage: Sendable, Equatable {
    public enum Kind: String, Codable, Sendable {
        /// A JSON document (`pass(_:identifier:)` with an Encodable, or `passJSON`).
        case json
        /// Bytes passed as `Data`.
        case data
    }

    public let identifier: String
    public let kind: Kind
    public let payload: Data
    /// Unique per pass.
    public let messageID: String
    /// When it was passed.
    public let passedAt: Date
    /// The process that passed it.
    public let senderPID: Int32
    /// Its position in the queue (`queue` transiting only).
    public let sequence: UInt64?

    init(identifier: String, envelope: Envelope, sequence: UInt64?) {
        self.identifier = identifier
        kind = envelope.header.kind
        payload = envelope.payload
        messageID = envelope.header.id
        passedAt = Date(timeIntervalSince1970: envelope.header.passed)
        senderPID = envelope.header.pid
        self.sequence = sequence
    }

    /// The payload decoded from JSON.
    /// - Throws: `.decodingFailed`, naming the type and the decoder's reason.
    public func decode<T: Decodable>(_ type: T.Type) throws(WormholeError) -> T {
        do {
            return try JSONDecoder().decode(T.self, from: payload)
        } catch {
            throw WormholeError(.decodingFailed, "message '\(identifier)' does not decode as \(T.self): \(error)")
        }
    }

    /// The payload as one line of JSON (what `wormhole read` and `listen` print), or nil if it
    /// is not JSON.
    public func jsonLine() -> String? {
        JSONText.compact(payload)
    }
}

/// JSON given as text (the CLI's arguments and stdin).
public enum JSONText {
    /// Checks that `data` is one JSON document (RFC 8259; any value, fragments too).
    /// - Throws: `.invalidJSON` with the reason and the byte where it was found.
    public static func validate(_ data: Data) throws(WormholeError) {
        var reader = JSONReader(Array(data))
        do { try reader.document() } catch {
            throw WormholeError(.invalidJSON, "not valid JSON: \(error.description)")
        }
    }

    /// The document on one line: unchanged (but for spaces around it) if it is one line already;
    /// otherwise with the whitespace between tokens removed, everything else (key order, how
    /// numbers are written, escapes) as it was given. Nil when it is not JSON.
    static func compact(_ data: Data) -> String? {
        var reader = JSONReader(Array(data), keep: true)
        guard (try? reader.document()) != nil else { return nil }
        if !data.contains(0x0a), !data.contains(0x0d) {
            let text = String(decoding: data, as: UTF8.self)
            return String(text.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
        }
        return String(decoding: reader.kept, as: UTF8.self)
    }
}

/// A strict JSON reader (RFC 8259) that checks a document and can keep it without its
/// insignificant whitespace. Written here because the Foundation this package links
/// (FoundationEssentials, to keep the tools small) has no JSONSerialization; and a payload is
/// never turned into objects, only checked, so nothing is lost or reformatted.
struct JSONReader {
    struct Failure: Error { let description: String }
    /// Deeper than this is refused: the reader recurses, and no real payload nests so far.
    static let maxDepth = 512

    private let bytes: [UInt8]
    private var at = 0
    private let keep: Bool
    private(set) var kept: [UInt8] = []

    init(_ bytes: [UInt8], keep: Bool = false) {
        self.bytes = bytes
        self.keep = keep
    }

    mutating func document() throws(Failure) {
        // JSON text is UTF-8 as a whole (so every string in it is).
        guard String(validating: bytes, as: UTF8.self) != nil else { throw Failure(description: "not UTF-8") }
        skipSpace()
        guard at < bytes.count else { throw fail(bytes.isEmpty ? "empty input" : "no value, only whitespace") }
        try value(depth: 0)
        skipSpace()
        if at < bytes.count { throw fail("unexpected \(shown(bytes[at])) after the value") }
    }

    private func fail(_ what: String) -> Failure { Failure(description: "\(what) at byte \(at)") }

    private func shown(_ byte: UInt8) -> String {
        (0x20 ..< 0x7f).contains(byte) ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x" + String(byte, radix: 16)
    }

    private mutating func skipSpace() {
        while at < bytes.count, [0x20, 0x09, 0x0a, 0x0d].contains(bytes[at]) { at += 1 }
    }

    private mutating func take() {
        if keep { kept.append(bytes[at]) }
        at += 1
    }

    private mutating func value(depth: Int) throws(Failure) {
        guard depth < Self.maxDepth else { throw fail("nested deeper than \(Self.maxDepth)") }
        guard at < bytes.count else { throw fail("unexpected end, a value expected") }
        switch bytes[at] {
        case UInt8(ascii: "{"): try container(close: UInt8(ascii: "}"), depth: depth, keyed: true)
        case UInt8(ascii: "["): try container(close: UInt8(ascii: "]"), depth: depth, keyed: false)
        case UInt8(ascii: "\""): try string()
        case UInt8(ascii: "t"): try literal("true")
        case UInt8(ascii: "f"): try literal("false")
        case UInt8(ascii: "n"): try literal("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0") ... UInt8(ascii: "9"): try number()
        default: throw fail("unexpected \(shown(bytes[at])), a value expected")
        }
    }

    private mutating func container(close: UInt8, depth: Int, keyed: Bool) throws(Failure) {
        take() // { or [
        skipSpace()
        if at < bytes.count, bytes[at] == close { take(); return }
        while true {
            skipSpace()
            if keyed {
                guard at < bytes.count, bytes[at] == UInt8(ascii: "\"") else { throw fail("a key (a string) expected") }
                try string()
                skipSpace()
                guard at < bytes.count, bytes[at] == UInt8(ascii: ":") else { throw fail("':' expected after a key") }
                take()
                skipSpace()
            }
            try value(depth: depth + 1)
            skipSpace()
            guard at < bytes.count else { throw fail("unexpected end, '\(Character(Unicode.Scalar(close)))' expected") }
            if bytes[at] == close { take(); return }
            guard bytes[at] == UInt8(ascii: ",") else { throw fail("unexpected \(shown(bytes[at])), ',' or '\(Character(Unicode.Scalar(close)))' expected") }
            take()
        }
    }

    private mutating func literal(_ word: String) throws(Failure) {
        let expected = Array(word.utf8)
        guard bytes.count - at >= expected.count, bytes[at ..< at + expected.count].elementsEqual(expected) else {
            throw fail("unexpected \(shown(bytes[at])), a value expected")
        }
        for _ in 0 ..< expected.count { take() }
    }

    private mutating func digits() -> Int {
        var count = 0
        while at < bytes.count, (UInt8(ascii: "0") ... UInt8(ascii: "9")).contains(bytes[at]) { take(); count += 1 }
        return count
    }

    private mutating func number() throws(Failure) {
        if bytes[at] == UInt8(ascii: "-") { take() }
        guard at < bytes.count, (UInt8(ascii: "0") ... UInt8(ascii: "9")).contains(bytes[at]) else { throw fail("a digit expected") }
        if bytes[at] == UInt8(ascii: "0") {
            take()
            if at < bytes.count, (UInt8(ascii: "0") ... UInt8(ascii: "9")).contains(bytes[at]) { throw fail("a number may not start with 0") }
        } else {
            _ = digits()
        }
        if at < bytes.count, bytes[at] == UInt8(ascii: ".") {
            take()
            guard digits() > 0 else { throw fail("a digit expected after '.'") }
        }
        if at < bytes.count, bytes[at] == UInt8(ascii: "e") || bytes[at] == UInt8(ascii: "E") {
            take()
            if at < bytes.count, bytes[at] == UInt8(ascii: "+") || bytes[at] == UInt8(ascii: "-") { take() }
            guard digits() > 0 else { throw fail("a digit expected in the exponent") }
        }
    }

    private mutating func string() throws(Failure) {
        take() // the opening quote
        while true {
            guard at < bytes.count else { throw fail("unexpected end inside a string") }
            let byte = bytes[at]
            if byte == UInt8(ascii: "\"") { take(); break }
            guard byte >= 0x20 else { throw fail("a control character (\(shown(byte))) inside a string") }
            if byte == UInt8(ascii: "\\") {
                take()
                guard at < bytes.count else { throw fail("unexpected end inside a string") }
                switch bytes[at] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                     UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    take()
                case UInt8(ascii: "u"):
                    take()
                    for _ in 0 ..< 4 {
                        guard at < bytes.count, bytes[at].isHexDigit else { throw fail("four hex digits expected after \\u") }
                        take()
                    }
                default: throw fail("an unknown escape \\\(shown(bytes[at]))")
                }
                continue
            }
            take()
        }
    }
}

private extension UInt8 {
    var isHexDigit: Bool {
        (UInt8(ascii: "0") ... UInt8(ascii: "9")).contains(self) || (UInt8(ascii: "a") ... UInt8(ascii: "f")).contains(self)
            || (UInt8(ascii: "A") ... UInt8(ascii: "F")).contains(self)
    }
}

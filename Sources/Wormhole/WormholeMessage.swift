import Foundation

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
    /// Checks that `data` is one JSON document (any value, fragments too).
    /// - Throws: `.invalidJSON` with the parser's reason.
    public static func validate(_ data: Data) throws(WormholeError) {
        do {
            _ = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        } catch {
            let reason = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String ?? "\(error)"
            throw WormholeError(.invalidJSON, "not valid JSON: \(reason)")
        }
    }

    /// The document on one line; unchanged if it already is one line.
    static func compact(_ data: Data) -> String? {
        guard let object = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]) else { return nil }
        if !data.contains(0x0a), !data.contains(0x0d), let text = String(data: data, encoding: .utf8) {
            return text.trimmingCharacters(in: .whitespaces)
        }
        guard let line = try? JSONSerialization.data(withJSONObject: object, options: [.fragmentsAllowed, .withoutEscapingSlashes, .sortedKeys])
        else { return nil }
        return String(data: line, encoding: .utf8)
    }
}

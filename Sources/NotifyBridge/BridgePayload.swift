import FoundationEssentials
import Glibc
// Bridge payload: what one MQTT message of a bridge carries (docs/BRIDGE.md, "Payloads").
//
//     DNB1 <origin> <seq> post\n
//     DNB1 <origin> <seq> state <value>\n
//     DNB1 <origin> <seq> wormhole\n<the message file, docs/PROTOCOL.md "Message file">
//     DNB1 <origin> <seq> distributed\n<the Distributed Post, marshalled: docs/PROTOCOL.md>
//
// `origin` names the bridge that published it (1–64 bytes of [A-Za-z0-9._-], new each run), so a
// bridge skips what it sent itself when the broker hands it back; `seq` counts that bridge's
// messages from 1, in the order it published them, so a receiver drops a redelivery (a `seq` not
// above the last one it took from that origin). A header line, not JSON: one split per message.

public struct BridgePayload: Equatable, Sendable {
    public enum Body: Equatable, Sendable {
        case post
        case state(UInt64)
        case wormhole(Data)
        /// A distributed notification: its Distributed Post signal as D-Bus marshals it.
        case distributed(Data)
    }

    public static let magic = "DNB1"
    public var origin: String
    public var sequence: UInt64
    public var body: Body

    public init(origin: String, sequence: UInt64, body: Body) {
        self.origin = origin
        self.sequence = sequence
        self.body = body
    }

    public func encoded() -> [UInt8] {
        var line = "\(Self.magic) \(origin) \(sequence) "
        switch body {
        case .post: line += "post\n"
        case .state(let value): line += "state \(value)\n"
        case .wormhole: line += "wormhole\n"
        case .distributed: line += "distributed\n"
        }
        var bytes = Array(line.utf8)
        if case .wormhole(let data) = body { bytes.append(contentsOf: data) }
        if case .distributed(let data) = body { bytes.append(contentsOf: data) }
        return bytes
    }

    /// Why a payload was refused, as a sentence for the bridge's report.
    public struct Fault: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    public static func decode(_ bytes: UnsafeRawBufferPointer) -> Result<BridgePayload, Fault> {
        guard let newline = bytes.prefix(200).firstIndex(of: 0x0A),
              let line = String(validating: bytes[..<newline], as: UTF8.self)
        else { return .failure(Fault(description: "not a bridge payload (no DNB1 header line)")) }
        let fields = line.split(separator: " ", omittingEmptySubsequences: false)
        guard fields.count >= 4, fields[0] == Substring(magic) else {
            return .failure(Fault(description: "not a bridge payload (no DNB1 header line)"))
        }
        guard isValidOrigin(fields[1]), let sequence = UInt64(fields[2]), sequence > 0 else {
            return .failure(Fault(description: "bridge payload header has a bad origin or sequence"))
        }
        let rest = bytes[(newline + 1)...]
        let body: Body
        switch (fields[3], fields.count) {
        case ("post", 4) where rest.isEmpty:
            body = .post
        case ("state", 5) where rest.isEmpty:
            guard let value = UInt64(fields[4]) else {
                return .failure(Fault(description: "state '\(fields[4])' is not a 64-bit unsigned number"))
            }
            body = .state(value)
        case ("wormhole", 4):
            body = .wormhole(Data(rest))
        case ("distributed", 4):
            body = .distributed(Data(rest))
        default:
            return .failure(Fault(description: "bridge payload of kind '\(fields[3])' is not valid"))
        }
        return .success(BridgePayload(origin: String(fields[1]), sequence: sequence, body: body))
    }

    public static func decode(_ bytes: [UInt8]) -> Result<BridgePayload, Fault> {
        bytes.withUnsafeBytes { decode($0) }
    }

    public static func isValidOrigin(_ origin: Substring) -> Bool {
        !origin.isEmpty && origin.utf8.count <= 64 && origin.utf8.allSatisfy {
            switch $0 {
            case UInt8(ascii: "A") ... UInt8(ascii: "Z"), UInt8(ascii: "a") ... UInt8(ascii: "z"),
                 UInt8(ascii: "0") ... UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"): true
            default: false
            }
        }
    }
}

/// Drops redeliveries: the last sequence taken from each (origin, topic) pair, in a bounded table
/// (the oldest pair is forgotten first, which only lets a very late duplicate of it through).
///
/// Keyed by topic as well as origin, so a message on one topic cannot raise the floor of another
/// (docs/BRIDGE.md, "Duplicates": under the documented ACL a client may write only its own
/// topics). A sequence that is not above the floor is a redelivery only within `window` of it
/// (2^20, the bound of one jump on the D-Bus side): one further back is a new numbering (a forged
/// huge number seen before, or an origin that restarted) and is taken, so a forged
/// 18446744073709551615 mutes nothing.
public struct Deduplicator: Sendable {
    private var last: [String: UInt64] = [:]
    private var order: [String] = []
    private var head = 0
    public let capacity: Int
    public static let window: UInt64 = 1 << 20

    public init(capacity: Int = 4096) { self.capacity = capacity }

    /// Whether the message is new; records it when it is.
    public mutating func accept(origin: String, topic: String, sequence: UInt64) -> Bool {
        let key = origin + "\n" + topic
        if let seen = last[key] {
            if sequence <= seen && seen - sequence < Deduplicator.window { return false }
            last[key] = sequence
            return true
        }
        if last.count >= capacity {
            // Forget the oldest pair; the order list is compacted now and then, not per message.
            while head < order.count, last[order[head]] == nil { head += 1 }
            if head < order.count { last[order[head]] = nil; head += 1 }
            if head > capacity { order.removeFirst(head); head = 0 }
        }
        order.append(key)
        last[key] = sequence
        return true
    }
}

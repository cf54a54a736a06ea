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

package struct BridgePayload: Equatable, Sendable {
    package enum Body: Equatable, Sendable {
        case post
        case state(UInt64)
        case wormhole(Data)
        /// A distributed notification: its Distributed Post signal as D-Bus marshals it.
        case distributed(Data)
    }

    package static let magic = "DNB1"
    package var origin: String
    package var sequence: UInt64
    package var body: Body

    package init(origin: String, sequence: UInt64, body: Body) {
        self.origin = origin
        self.sequence = sequence
        self.body = body
    }

    package func encoded() -> [UInt8] {
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
    package struct Fault: Error, Equatable, CustomStringConvertible {
        package let description: String
    }

    package static func decode(_ bytes: UnsafeRawBufferPointer) -> Result<BridgePayload, Fault> {
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

    package static func decode(_ bytes: [UInt8]) -> Result<BridgePayload, Fault> {
        bytes.withUnsafeBytes { decode($0) }
    }

    package static func isValidOrigin(_ origin: Substring) -> Bool {
        !origin.isEmpty && origin.utf8.count <= 64 && origin.utf8.allSatisfy {
            switch $0 {
            case UInt8(ascii: "A") ... UInt8(ascii: "Z"), UInt8(ascii: "a") ... UInt8(ascii: "z"),
                 UInt8(ascii: "0") ... UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"): true
            default: false
            }
        }
    }
}

/// Tells redeliveries from late messages: per (origin, topic), the sequences taken, exactly, up to
/// `memory` of them (the newest), in a table bounded by pairs (`capacity`) and by sequences in all
/// (`budget`); the oldest pair is forgotten first, which only lets a very late duplicate of it
/// through.
///
/// A broker may hand a message out again (QoS 1 after a lost acknowledgement: a duplicate), and a
/// cluster may hand one out *late*, after later ones of its topic: NATS redelivers what a dead node
/// had sent and nobody acknowledged only after its `ack_wait`. A floor ("the last sequence taken")
/// dropped such a late message as a duplicate although it was never taken (issue 38); so the
/// sequences themselves are kept, and a message below the newest is `late` when it is not among
/// them, `duplicate` when it is.
///
/// Keyed by topic as well as origin, so a message on one topic cannot touch another (docs/BRIDGE.md,
/// "Duplicates": under the documented ACL a client may write only its own topics). A sequence more
/// than `window` (2^20, the bound of one jump on the D-Bus side) below the newest is a new
/// numbering (a forged huge number seen before, or an origin that restarted) and starts the pair
/// over, so a forged 18446744073709551615 mutes nothing. One below the sequences remembered
/// (more than `memory` later ones of its topic came first) cannot be told apart and is taken as a
/// duplicate.
package struct Deduplicator: Sendable {
    package enum Verdict: Equatable, Sendable {
        /// Later than every message taken from its origin on its topic.
        case new
        /// Never taken, but a later one of its topic was (a redelivery that came late).
        case late
        /// Taken before (or too far behind to tell).
        case duplicate
    }

    private struct Taken {
        /// Ascending; the newest `memory` sequences taken.
        var sequences: [UInt64]
        /// Whether `sequences` still holds every sequence taken since the pair was made.
        var complete = true
    }

    private var taken: [String: Taken] = [:]
    /// Per origin, the newest sequence taken on any topic (at most `capacity` origins).
    private var newestOfOrigin: [String: UInt64] = [:]
    private var order: [String] = []
    private var head = 0
    /// Sequences remembered, over all pairs.
    private var total = 0
    package let capacity: Int
    package let memory: Int
    /// Sequences remembered in all, at most: past it the oldest pairs are forgotten, so a client
    /// that writes on thousands of topics holds the table to this (8 bytes each), not to
    /// `capacity × memory`.
    package let budget: Int
    package static let window: UInt64 = 1 << 20

    package init(capacity: Int = 4096, memory: Int = 4096, budget: Int = 1 << 18) {
        self.capacity = capacity
        self.memory = memory
        self.budget = max(budget, memory + memory / 8 + 1)
    }

    /// Whether the message is new, late or a duplicate; records it unless it is a duplicate.
    package mutating func check(origin: String, topic: String, sequence: UInt64) -> Verdict {
        let key = origin + "\n" + topic
        // Taken out of the table while it changes, so its array is not shared (copied) on write.
        guard var entry = taken.removeValue(forKey: key) else {
            makeRoom()
            order.append(key)
            taken[key] = Taken(sequences: [sequence])
            total += 1
            keepToBudget()
            return .new
        }
        let before = entry.sequences.count
        let newest = entry.sequences[before - 1]
        var verdict = Verdict.new
        if sequence > newest {
            entry.sequences.append(sequence)
        } else if newest - sequence >= Deduplicator.window {
            entry = Taken(sequences: [sequence]) // a new numbering
        } else {
            let index = Self.lowerBound(entry.sequences, sequence)
            if (index < before && entry.sequences[index] == sequence) || (index == 0 && !entry.complete) {
                verdict = .duplicate // taken before, or older than what is remembered
            } else {
                entry.sequences.insert(sequence, at: index)
                verdict = .late
            }
        }
        if entry.sequences.count > memory + memory / 8 { // trimmed in steps, not per message
            entry.sequences.removeFirst(entry.sequences.count - memory)
            entry.complete = false
        }
        total += entry.sequences.count - before
        taken[key] = entry
        keepToBudget()
        return verdict
    }

    /// Whether a message taken comes after a later one of its origin, on any topic: out of the
    /// origin's order (counted `reordered`). A sequence `window` or more below the newest is a new
    /// numbering, not out of order. Records the newest per origin; an origin past `capacity`
    /// pushes out another (which only misses an out-of-order message of that one).
    package mutating func behind(origin: String, sequence: UInt64) -> Bool {
        guard let newest = newestOfOrigin[origin] else {
            if newestOfOrigin.count >= capacity { newestOfOrigin.remove(at: newestOfOrigin.startIndex) }
            newestOfOrigin[origin] = sequence
            return false
        }
        if sequence > newest || newest - sequence >= Deduplicator.window {
            newestOfOrigin[origin] = sequence
            return false
        }
        return sequence < newest
    }

    /// How many origins `behind` remembers now.
    package var originsRemembered: Int { newestOfOrigin.count }

    /// Whether the message is to be taken (new or late); records it when it is.
    package mutating func accept(origin: String, topic: String, sequence: UInt64) -> Bool {
        check(origin: origin, topic: topic, sequence: sequence) != .duplicate
    }

    /// Forgets the oldest pair when the table is full.
    private mutating func makeRoom() {
        if taken.count >= capacity { forgetOldest() }
    }

    /// Forgets the oldest pairs while more sequences than `budget` are remembered.
    private mutating func keepToBudget() {
        while total > budget, forgetOldest() {}
    }

    /// Forgets the oldest pair still in the table; the order list is compacted now and then.
    @discardableResult
    private mutating func forgetOldest() -> Bool {
        while head < order.count, taken[order[head]] == nil { head += 1 }
        guard head < order.count, let gone = taken.removeValue(forKey: order[head]) else { return false }
        total -= gone.sequences.count
        head += 1
        if head > capacity { order.removeFirst(head); head = 0 }
        return true
    }

    private static func lowerBound(_ sorted: [UInt64], _ value: UInt64) -> Int {
        var low = 0, high = sorted.count
        while low < high {
            let middle = (low + high) / 2
            if sorted[middle] < value { low = middle + 1 } else { high = middle }
        }
        return low
    }
}

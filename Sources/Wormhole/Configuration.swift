import FoundationEssentials
import Glibc

/// How messages travel through the container (chosen per wormhole).
public enum Transiting: String, Sendable, CaseIterable {
    /// One message per identifier, last write wins, replaced atomically.
    case file
    /// As `file`, with a cross-process lock around reads and writes, and `update` for an atomic
    /// read-modify-write.
    case coordinated
    /// A lossless FIFO per identifier; named listeners resume from a durable cursor.
    case queue
}

/// Limits and durability of a wormhole.
public struct WormholeConfiguration: Sendable, Equatable {
    /// Larger payloads are refused before anything is written.
    public var maxPayloadBytes: Int = 16 << 20
    /// Sync each message to the disk before it is announced (before it is renamed into place, or,
    /// written in place, before the announcement), so a power loss cannot leave an empty file
    /// under the message's name (docs/PROTOCOL.md, "Durability"). Not done on tmpfs/ramfs, which
    /// have no disk.
    public var syncToDisk: Bool = true
    /// Retention of `queue` transiting.
    public var queue = QueueRetention()

    /// The largest message file (or queue record) a reader takes: a payload at the limit, its
    /// header line and slack.
    var maxFileBytes: Int { maxPayloadBytes + Envelope.maxHeaderBytes + 8 }

    public init(maxPayloadBytes: Int = 16 << 20, syncToDisk: Bool = true, queue: QueueRetention = QueueRetention()) {
        self.maxPayloadBytes = maxPayloadBytes
        self.syncToDisk = syncToDisk
        self.queue = queue
    }
}

/// How much a queue keeps. A message is removed once every named listener has read it, or when
/// it is older than `maxAge`; a pass that would exceed `maxMessages` or `maxBytes` follows
/// `overflow`. Nothing is removed unread without being reported: a listener that had not read
/// a removed message gets `.messagesLost` with the count.
public struct QueueRetention: Sendable, Equatable {
    public enum Overflow: String, Sendable, Equatable {
        /// The pass throws `.queueFull`; the queue is unchanged (the default: the writer decides).
        case reject
        /// The oldest messages are removed to make room; lagging listeners get `.messagesLost`.
        case dropOldest
    }

    public var maxMessages: Int
    public var maxBytes: Int
    /// Seconds; messages older than this are removed at the next pass.
    public var maxAge: Double
    public var overflow: Overflow

    public init(maxMessages: Int = 100_000, maxBytes: Int = 1 << 30, maxAge: Double = 7 * 86_400,
                overflow: Overflow = .reject) {
        self.maxMessages = maxMessages
        self.maxBytes = maxBytes
        self.maxAge = maxAge
        self.overflow = overflow
    }
}

// MessageStore.swift: where a wormhole keeps its messages, chosen once from its transiting:
// the latest message per identifier (`file`, `coordinated`), or a lossless queue per identifier
// (`queue`). Every operation that differs by transiting is a requirement here, so the wormhole
// asks its store instead of switching on the transiting at each call.
import SystemPackage

/// What a written message leaves to the wormhole.
enum Written: Sendable {
    /// Announce it now, then finish the replacement (SpareFile.swift).
    case announce(SpareFiles.Replaced)
    /// The store announces it itself, once it is synced (GroupCommit.swift).
    case announcedBySync
}

protocol MessageStore: Sendable {
    func write(_ envelope: Envelope, identifier: String) throws(WormholeError) -> Written
    /// A mirrored copy: a latest-message store keeps it only if it is newer than what it holds.
    /// Returns false when it was not kept.
    func mirror(_ envelope: Envelope, message: WormholeMessage, identifier: String) throws(WormholeError) -> Bool
    /// The current message (the newest, for a queue), nil if none.
    func read(_ identifier: String) throws(WormholeError) -> WormholeMessage?
    func clear(_ identifier: String) throws(WormholeError)
    func identifiers() throws(WormholeError) -> [String]
    /// What a listener of `identifier` reads from (`name`: a durable queue listener).
    func source(_ identifier: String, name: String?) throws(WormholeError) -> any MessageSource
}

/// `file` and `coordinated` transiting: one file per identifier (MessageFiles.swift).
struct LatestMessageStore: MessageStore {
    let files: MessageFiles

    func write(_ envelope: Envelope, identifier: String) throws(WormholeError) -> Written {
        .announce(try files.write(envelope, identifier: identifier))
    }

    func mirror(_ envelope: Envelope, message: WormholeMessage, identifier: String) throws(WormholeError) -> Bool {
        // Last writer wins, by the time it was passed: an older copy never replaces a newer one.
        if let current = try? files.read(identifier),
           current.messageID == message.messageID || current.passedAt > message.passedAt { return false }
        try files.write(envelope, identifier: identifier).finish()
        return true
    }

    func read(_ identifier: String) throws(WormholeError) -> WormholeMessage? { try files.read(identifier) }

    func clear(_ identifier: String) throws(WormholeError) { try files.clear(identifier) }

    func identifiers() throws(WormholeError) -> [String] { try files.identifiers() }

    func source(_ identifier: String, name: String?) throws(WormholeError) -> any MessageSource {
        if let name {
            throw WormholeError(.unsupported, "listener name '\(name)' needs queue transiting: file transiting keeps no cursors")
        }
        return LatestMessageSource(files: files, identifier: identifier)
    }
}

/// `queue` transiting: a FIFO directory per identifier (MessageQueue.swift).
struct QueueStore: MessageStore {
    let layout: Layout
    let configuration: WormholeConfiguration
    /// Syncs and announces passes in groups, when they are synced at all (not on tmpfs).
    let committer: GroupCommit?
    /// The queues this store has used, with their paths made once: every pass and read would
    /// otherwise parse them again (`FilePath`; in a debug build most of a pass's time). At most
    /// `madeLimit`, then it starts again (a process that passes to ever new identifiers keeps a
    /// bounded number).
    private let made = SharedBox<[String: MessageQueue]>([:])
    private static let madeLimit = 64

    init(layout: Layout, configuration: WormholeConfiguration, committer: GroupCommit?) {
        self.layout = layout
        self.configuration = configuration
        self.committer = committer
    }

    func queue(_ identifier: String) -> MessageQueue {
        if let known = made.withLock({ $0[identifier] }) { return known }
        let queue = MessageQueue(layout: layout, identifier: identifier, configuration: configuration)
        made.withLock {
            if $0.count >= QueueStore.madeLimit { $0.removeAll(keepingCapacity: true) }
            $0[identifier] = queue
        }
        return queue
    }

    func write(_ envelope: Envelope, identifier: String) throws(WormholeError) -> Written {
        try queue(identifier).append(envelope, committer: committer)
        return committer == nil ? .announce(.nothing) : .announcedBySync
    }

    func mirror(_ envelope: Envelope, message: WormholeMessage, identifier: String) throws(WormholeError) -> Bool {
        try queue(identifier).append(envelope)
        return true
    }

    func read(_ identifier: String) throws(WormholeError) -> WormholeMessage? { try queue(identifier).latest() }

    func clear(_ identifier: String) throws(WormholeError) { try queue(identifier).clear() }

    func identifiers() throws(WormholeError) -> [String] {
        try PosixFiles.listDirectory(layout.queues).filter { (try? queue($0).currentState().count) ?? 0 > 0 }
    }

    func source(_ identifier: String, name: String?) throws(WormholeError) -> any MessageSource {
        try QueueSource(queue: queue(identifier), listenerName: name)
    }
}

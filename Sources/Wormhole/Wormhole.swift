import DarwinNotify
import Dispatch
import FoundationEssentials
import Glibc
import SystemPackage

/// Messages with payloads between cooperating processes: the payload is persisted in the group
/// container, and a Darwin notification announces it (MMWormhole's design, without its losses:
/// see docs/DESIGN.md).
public final class Wormhole: Sendable {
    public let container: GroupContainer
    /// The wormhole's folder inside the container (MMWormhole's `optionalDirectory`).
    public let directory: String
    public let transiting: Transiting
    public let configuration: WormholeConfiguration
    public let center: NotifyCenter
    let layout: Layout
    /// `configuration`, with `syncToDisk` off on a RAM file system, where fsync has no disk to
    /// reach and only costs time.
    let storage: WormholeConfiguration
    /// Where messages are kept, chosen from `transiting` once (MessageStore.swift).
    let store: any MessageStore

    /// Opens the wormhole `directory` of a group container, creating its folders.
    /// - Parameters:
    ///   - group: the group's identifier, as an App Group's (`[A-Za-z0-9._-]`, up to 128 bytes).
    ///   - directory: the wormhole's folder inside the container (MMWormhole's optional directory).
    ///   - transiting: how messages are kept: the latest per identifier (`.file`), the same under a
    ///     lock (`.coordinated`), or every message in order (`.queue`).
    ///   - container: where the group's files are; by default found from `group` (see
    ///     `GroupContainer`).
    ///   - configuration: payload limit, durability and queue retention.
    ///   - center: the notification center that announces messages; `.default` is the process's.
    /// - Throws: `.invalidGroup`, `.invalidIdentifier` (directory), `.unsafeContainer`, `.io`.
    public init(group: String, directory: String = "wormhole", transiting: Transiting = .file,
                container: GroupContainer? = nil, configuration: WormholeConfiguration = WormholeConfiguration(),
                center: NotifyCenter = .default) throws(WormholeError) {
        _ = ForkedChild.installed
        try Names.validateDirectory(directory)
        let container = if let container { container } else { try GroupContainer(group: group) }
        guard container.group == group else {
            throw WormholeError(.invalidGroup, "container is for group '\(container.group)', not '\(group)'")
        }
        guard configuration.maxPayloadBytes >= 0 else {
            throw WormholeError(.payloadTooLarge, "maxPayloadBytes must not be negative")
        }
        self.container = container
        self.directory = directory
        self.transiting = transiting
        self.configuration = configuration
        self.center = center
        layout = Layout(base: FilePath(container.path).appending(directory), shared: container.sharing != .privateToUser)
        try layout.makeDirectories()
        var storage = configuration
        if PosixFiles.isInMemory(layout.base) { storage.syncToDisk = false }
        self.storage = storage
        if transiting == .queue {
            // The committer announces with the center, not through self: no cycle.
            let group = container.group
            let committer = storage.syncToDisk ? GroupCommit { (identifier: String) throws(WormholeError) in
                do throws(NotifyError) {
                    try center.post(Names.notificationName(group: group, directory: directory, identifier: identifier))
                } catch {
                    throw WormholeError.notification(error,
                        "message '\(identifier)' is stored, but announcing it failed; listeners see it at the next announcement")
                }
            } : nil
            store = QueueStore(layout: layout, configuration: storage, committer: committer)
        } else {
            store = LatestMessageStore(files: MessageFiles(layout: layout, coordinated: transiting == .coordinated, configuration: storage))
        }
    }

    /// The notification name that announces messages of `identifier` (docs/PROTOCOL.md).
    public func notificationName(for identifier: String) -> String {
        Names.notificationName(group: container.group, directory: directory, identifier: identifier)
    }

    var files: MessageFiles {
        MessageFiles(layout: layout, coordinated: transiting == .coordinated, configuration: storage)
    }


    // MARK: Passing

    /// Passes `message` as JSON (MMWormhole `passMessageObject:identifier:`).
    /// - Throws: `.encodingFailed`, `.payloadTooLarge`, `.diskFull`, `.queueFull`, `.notification`
    ///   (also, with nothing written, in a child after `fork()` until it execs: see the overview).
    public func pass<T: Encodable>(_ message: T, identifier: String) throws(WormholeError) {
        try Names.validateIdentifier(identifier)
        let payload: Data
        do { payload = try JSONEncoder().encode(message) } catch {
            throw WormholeError(.encodingFailed, "cannot encode \(T.self) as JSON: \(error)")
        }
        try store(payload, kind: .json, identifier: identifier)
    }

    /// Passes raw bytes.
    public func pass(data: Data, identifier: String) throws(WormholeError) {
        try Names.validateIdentifier(identifier)
        try store(data, kind: .data, identifier: identifier)
    }

    /// Passes JSON text, after checking that it parses (what `wormhole pass` does). Whitespace
    /// around the document (a here-doc's final newline) is dropped.
    /// - Throws: `.invalidJSON` and the errors of `pass`.
    public func passJSON(_ text: Data, identifier: String) throws(WormholeError) {
        try Names.validateIdentifier(identifier)
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x0a || $0 == 0x0d || $0 == 0x09 }
        let start = text.firstIndex { !isSpace($0) } ?? text.endIndex
        let end = text.lastIndex { !isSpace($0) }.map { $0 + 1 } ?? start
        let text = Data(text[start..<max(start, end)])
        try JSONText.validate(text)
        try store(text, kind: .json, identifier: identifier)
    }

    /// Writes and announces a payload whose identifier the caller has validated.
    private func store(_ payload: Data, kind: WormholeMessage.Kind, identifier: String) throws(WormholeError) {
        try ForkedChild.refuse("pass of '\(identifier)'")
        guard payload.count <= configuration.maxPayloadBytes else {
            throw WormholeError(.payloadTooLarge,
                "payload for '\(identifier)' is \(payload.count) bytes, over the limit of \(configuration.maxPayloadBytes); nothing was written")
        }
        switch try store.write(Envelope(kind: kind, payload: payload), identifier: identifier) {
        case .announce(let replaced):
            defer { replaced.finish() }
            try announce(identifier)
        case .announcedBySync:
            break
        }
    }

    /// Waits until every message this wormhole passed is on the disk and announced. A `queue`
    /// wormhole on disk syncs and announces its passes in groups, after `pass` returned
    /// (docs/PROTOCOL.md, "Wormhole files"); the other kinds are synced and announced before
    /// `pass` returns, and this returns at once. A process that exits flushes too.
    /// - Throws: what failed in a sync or announcement after its pass had returned (`.io`,
    ///   `.notification`); the message itself is kept.
    public func flush() throws(WormholeError) {
        try ForkedChild.refuse("flush")
        try (store as? QueueStore)?.committer?.flush()
    }

    func announce(_ identifier: String) throws(WormholeError) {
        do {
            try center.post(notificationName(for: identifier))
        } catch {
            throw WormholeError.notification(error,
                "message '\(identifier)' is stored, but announcing it failed; listeners see it at the next announcement")
        }
    }

    // MARK: Reading

    /// The current message of `identifier` (the newest, for a queue), nil if there is none.
    /// - Throws: `.corruptMessage` (the file was quarantined), `.io`.
    public func message(_ identifier: String) throws(WormholeError) -> WormholeMessage? {
        try Names.validateIdentifier(identifier)
        return try store.read(identifier)
    }

    /// The current message decoded as `T` (MMWormhole `messageWithIdentifier:`).
    /// - Throws: `.decodingFailed` if it is not a `T`, and the errors of `message(_:)`.
    public func message<T: Decodable>(_ identifier: String, as type: T.Type) throws(WormholeError) -> T? {
        try message(identifier)?.decode(T.self)
    }

    /// Atomically reads, changes and writes back the message of `identifier`, under the
    /// cross-process lock of `coordinated` transiting, then announces it. Two processes updating
    /// at once never lose an update. Returns the value written.
    /// - Throws: `.unsupported` unless transiting is `.coordinated`, plus encoding/IO errors.
    @discardableResult
    public func update<T: Codable>(_ identifier: String, as type: T.Type,
                                   _ body: (inout T?) throws -> Void) throws(WormholeError) -> T? {
        try Names.validateIdentifier(identifier)
        guard transiting == .coordinated else {
            throw WormholeError(.unsupported, "update needs coordinated transiting (this wormhole is \(transiting.rawValue))")
        }
        try ForkedChild.refuse("update of '\(identifier)'")
        let value = try files.update(identifier, as: type, body)
        try announce(identifier)
        return value
    }

    // MARK: Clearing and listing

    /// Removes the message(s) of `identifier` (MMWormhole `clearMessageContentsForIdentifier:`).
    public func clear(_ identifier: String) throws(WormholeError) {
        try Names.validateIdentifier(identifier)
        try ForkedChild.refuse("clear of '\(identifier)'")
        try store.clear(identifier)
    }

    /// Removes every message of this wormhole (MMWormhole `clearAllMessageContents`).
    public func clearAll() throws(WormholeError) {
        for identifier in try identifiers() { try clear(identifier) }
    }

    /// Identifiers that have messages.
    public func identifiers() throws(WormholeError) -> [String] { try store.identifiers() }

    // MARK: Listening

    /// Calls `handler` on `queue` for each message of `identifier` passed from now on
    /// (MMWormhole `listenForMessageWithIdentifier:listener:`). Each listener has its own token
    /// and gets each message once. A damaged message reaches the handler as a failure
    /// (`.corruptMessage`, file quarantined) and listening goes on.
    ///
    /// With `queue` transiting, a `name` makes the listener durable: it first receives what was
    /// passed while it was not running, and a later listener of that name resumes after the
    /// last message whose handler returned.
    /// - Parameters:
    ///   - identifier: the message identifier to listen for.
    ///   - name: a durable listener's name (`.queue` transiting only), or nil.
    ///   - queue: where `handler` runs; by default a serial queue of this listener's own. With
    ///     `nil` there is no thread hop, as with `NotifyCenter.observe(_:queue:handler:)`: the
    ///     message is read and the handler runs on the center's delivery thread, except for what
    ///     was waiting when listening started, which a background thread hands out. Either way
    ///     one at a time and in order. Keep such a handler short: every observer of the center
    ///     waits for it (a pass from it waits for the pass's sync), and for the read (which
    ///     waits while a writer holds the message file, up to 2 s for one stopped mid-pass).
    ///   - handler: called with each message, or with the error that stood in its place.
    public func listen(for identifier: String, name: String? = nil,
                       queue: DispatchQueue? = DispatchQueue(label: "Wormhole.listener"),
                       handler: @escaping @Sendable (Result<WormholeMessage, WormholeError>) -> Void)
        throws(WormholeError) -> WormholeListener {
        let source = try makeSource(identifier, name: name)
        let listener = WormholeListener(source: source, placement: queue.map { .queue($0) } ?? .announcingThread,
                                        handler: handler)
        try listener.start(center: center, name: notificationName(for: identifier))
        return listener
    }

    /// `listen` with the payload decoded as `T`; a payload that is not a `T` arrives as
    /// `.decodingFailed`.
    public func listen<T: Decodable & Sendable>(for identifier: String, as type: T.Type, name: String? = nil,
                                                queue: DispatchQueue? = DispatchQueue(label: "Wormhole.listener"),
                                                handler: @escaping @Sendable (Result<T, WormholeError>) -> Void)
        throws(WormholeError) -> WormholeListener {
        try listen(for: identifier, name: name, queue: queue) { result in
            handler(result.flatMap { message in Result { () throws(WormholeError) -> T in try message.decode(T.self) } })
        }
    }

    /// The messages of `identifier` as an async sequence: the same delivery as `listen`. For a
    /// named queue listener a message counts as handled when the iterator is asked for the next.
    public func messages(for identifier: String, name: String? = nil) throws(WormholeError) -> WormholeMessages {
        let source = try makeSource(identifier, name: name)
        let delivery = MessageDelivery(source: source, placement: .ownQueue, handler: nil)
        try delivery.start(center: center, name: notificationName(for: identifier))
        return WormholeMessages(delivery: delivery)
    }

    private func makeSource(_ identifier: String, name: String?) throws(WormholeError) -> any MessageSource {
        try Names.validateIdentifier(identifier)
        try ForkedChild.refuse("listening to '\(identifier)'")
        return try store.source(identifier, name: name)
    }
}

extension Wormhole {
    /// Checks a group identifier as `GroupContainer` does, without touching the disk.
    public static func validateGroup(_ group: String) throws(WormholeError) { try Names.validateGroup(group) }
    /// Checks a message identifier as every call does, without touching the disk.
    public static func validateIdentifier(_ identifier: String) throws(WormholeError) {
        try Names.validateIdentifier(identifier)
    }
}

/// Whether a wormhole whose files are at `path` takes them for memory (tmpfs or ramfs), and so
/// does not sync them to disk: for the test probe (`wormhole-probe in-memory`).
package func wormholeStorageIsInMemory(_ path: String) -> Bool { PosixFiles.isInMemory(FilePath(path)) }

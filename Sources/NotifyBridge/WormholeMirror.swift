// Wormhole mirror: one group's wormhole on this host ↔ the broker (notify-bridge --wormhole,
// docs/BRIDGE.md "Wormhole"). `file` transiting: the latest message per identifier, retained at
// `…/file/<identifier>`. `queue` transiting: every message, QoS 1 at `…/queue/<identifier>`, read
// here by a named queue listener (so nothing passed while the bridge was down is missed) and
// appended there to the same queue (so a named listener that was not running gets it later).
// Copies arrive with pid 0, and a bridge never sends a pid-0 message out: no echo, even across
// restarts.
import DarwinNotify
import Dispatch
import FoundationEssentials
import Glibc
import Synchronization
import Wormhole

final class WormholeMirror: Sendable {
    /// Every wormhole announcement is under it (`org.darwinnotify.wormhole/<group>/…`).
    static let announcementNamespace = "org.darwinnotify"

    enum Kind: String, Sendable { case file, queue }

    let group: String
    let topicPrefix: String
    var filter: String { topicPrefix + "#" }
    private let announcementPrefix: String
    private let files: Wormhole
    private let queues: Wormhole
    private let listenerName: String
    private unowned let bridge: Bridge
    /// File I/O and listener callbacks, off the bus's delivery thread.
    private let work: DispatchQueue
    private let listeners = Mutex<[String: WormholeListener]>([:])
    /// The id of the last `file` message sent per identifier.
    private let sentFileIDs = Mutex<[String: String]>([:])

    init(bridge: Bridge, group: String, directory: String, listenerName: String, center: NotifyCenter) throws {
        self.bridge = bridge
        self.group = group
        self.listenerName = listenerName
        files = try Wormhole(group: group, directory: directory, transiting: .file, center: center)
        queues = try Wormhole(group: group, directory: directory, transiting: .queue, center: center)
        announcementPrefix = String(files.notificationName(for: "x").dropLast())
        topicPrefix = TopicCodec.wormholeRoot + "/" + TopicCodec.level(group) + "/" + TopicCodec.level(directory) + "/"
        work = DispatchQueue(label: "notify-bridge wormhole \(group)")
    }

    func start() {
        work.async { [self] in
            let present = files.mirrorableIdentifiers()
            for identifier in present.files { exportFile(identifier) }
            for identifier in present.queues { listenToQueue(identifier) }
        }
    }

    func stop() {
        for listener in listeners.withLock({ Array($0.values) }) { listener.cancelAndWait() }
    }

    /// The identifier an announcement of this group's wormhole names, nil for any other name.
    func identifier(inAnnouncement name: String) -> String? {
        guard name.hasPrefix(announcementPrefix) else { return nil }
        let identifier = String(name.dropFirst(announcementPrefix.count))
        return (try? Wormhole.validateIdentifier(identifier)) != nil ? identifier : nil
    }

    /// Another process of this host passed a message for `identifier`.
    func localAnnouncement(_ identifier: String) {
        work.async { [self] in
            exportFile(identifier)
            listenToQueue(identifier)
        }
    }

    private func exportFile(_ identifier: String) {
        let message: WormholeMessage?
        do { message = try files.message(identifier) } catch {
            bridge.reporter.repeated("wormhole-read:" + identifier, "cannot read wormhole message '\(identifier)' of \(group): \(error)")
            return
        }
        guard let message, !message.isMirrored,
              sentFileIDs.withLock({ $0[identifier] }) != message.messageID else { return }
        let topic = topicPrefix + Kind.file.rawValue + "/" + TopicCodec.level(identifier)
        if bridge.publish(topic: topic, body: .wormhole(files.encodedForMirror(message)), retain: true) {
            sentFileIDs.withLock { $0[identifier] = message.messageID }
            bridge.wormholeExported()
        }
    }

    private func listenToQueue(_ identifier: String) {
        guard listeners.withLock({ $0[identifier] == nil }),
              queues.hasQueue(identifier) else { return }
        let topic = topicPrefix + Kind.queue.rawValue + "/" + TopicCodec.level(identifier)
        do {
            let listener = try queues.listen(for: identifier, name: listenerName, queue: work) { [self] result in
                switch result {
                case .success(let message):
                    guard !message.isMirrored else { return }
                    if bridge.publish(topic: topic, body: .wormhole(queues.encodedForMirror(message))) { bridge.wormholeExported() }
                case .failure(let error):
                    bridge.reporter.say("wormhole queue '\(identifier)' of \(group): \(error)")
                }
            }
            listeners.withLock { $0[identifier] = listener }
        } catch {
            bridge.reporter.say("cannot read wormhole queue '\(identifier)' of \(group) as '\(listenerName)': \(error)")
        }
    }

    /// The kind and identifier of a topic under `topicPrefix`.
    func parse(topic: String) -> (Kind, String)? {
        guard topic.hasPrefix(topicPrefix) else { return nil }
        let rest = topic.dropFirst(topicPrefix.count)
        guard let slash = rest.firstIndex(of: "/"), let kind = Kind(rawValue: String(rest[..<slash])),
              let identifier = TopicCodec.text(fromLevel: rest[rest.index(after: slash)...]),
              (try? Wormhole.validateIdentifier(identifier)) != nil
        else { return nil }
        return (kind, identifier)
    }

    /// Stores a message from another host; false when it was already here.
    func store(_ encoded: Data, identifier: String, kind: Kind) throws(WormholeError) -> Bool {
        try (kind == .file ? files : queues).storeMirrored(encoded, identifier: identifier) != nil
    }
}

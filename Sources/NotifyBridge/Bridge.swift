// Bridge: one local bus ↔ one MQTT broker (docs/BRIDGE.md). Local posts of exported namespaces
// are published; messages of imported namespaces are posted locally; state and wormhole messages
// travel as retained or QoS 1 messages. Nothing the bridge itself posted locally goes out again
// (DeliveredPost.fromThisCenter tells it), and nothing it published comes back in (`origin`).
import CNotify
import DarwinNotify
import Dispatch
import FoundationEssentials
import Glibc
import Synchronization
import Wormhole

/// The nine choices a bridge starts with besides its broker connection: one definition, which
/// the command line (``BridgeArguments``) and the running bridge (``BridgeConfiguration``) share.
package struct BridgeOptions: Sendable {
    /// The local bus (an address, `session`, `system`, `embedded`), nil for the default.
    package var bus: String?
    package var exports: [String] = []
    package var imports: [String] = []
    /// Import `user.uid.N` names: only when the broker's ACL lets nobody but N's bridges publish
    /// under `darwin-notify/user/uid/N/` (docs/BRIDGE.md, "user.uid.N").
    package var brokerACLEnforced = false
    /// Messages published and not yet acknowledged by the broker, at most; past it, new ones are
    /// dropped and reported (the broker is unreachable or too slow).
    package var queueLimit = 100_000
    /// Distinct state names imported from the broker, at most: each is a file on this host, and
    /// any client allowed to publish in an imported namespace could otherwise make unbounded
    /// files. Past it, states of new names are refused and counted (`states-limited`).
    package var stateLimit = 10_000
    package var wormholeGroups: [String] = []
    package var wormholeDirectory = "wormhole"
    /// The named queue listener a bridge reads each wormhole queue with.
    package var wormholeListener = "notify-bridge"

    package init() {}
}

/// A bridge's configuration: its options, the broker connection, and this run's origin.
@dynamicMemberLookup
package struct BridgeConfiguration: Sendable {
    package var options = BridgeOptions()
    package var mqtt: MQTTOptions
    /// This run's name in payloads (new each run, so sequence numbers never repeat under it).
    package var origin: String

    package init(mqtt: MQTTOptions, origin: String) {
        self.mqtt = mqtt
        self.origin = origin
    }

    package subscript<Value>(dynamicMember option: WritableKeyPath<BridgeOptions, Value>) -> Value {
        get { options[keyPath: option] }
        set { options[keyPath: option] = newValue }
    }
}

/// The bridge's counters, printed by `notify-bridge` on SIGUSR1 and at exit.
package struct BridgeCounters: Sendable, Equatable, CustomStringConvertible {
    /// Published: handed to the MQTT client (QoS 1), in order.
    package var exported: UInt64 = 0
    /// Of those, acknowledged by the broker (PUBACK): the broker has them.
    package var acknowledged: UInt64 = 0
    /// Messages from the broker (not our own), before any check.
    package var received: UInt64 = 0
    /// Posts and distributed notifications made on the local bus.
    package var imported: UInt64 = 0
    package var statesExported: UInt64 = 0
    package var statesImported: UInt64 = 0
    package var wormholeExported: UInt64 = 0
    package var wormholeImported: UInt64 = 0
    package var duplicates: UInt64 = 0
    /// Taken although a later message of their topic came first (a cluster's late redelivery).
    package var late: UInt64 = 0
    /// Taken after a later message of their origin on another topic (out of the origin's order:
    /// a failover where a node acknowledged later messages and died before an earlier one, which
    /// was sent again). The late ones are not counted here.
    package var reordered: UInt64 = 0
    /// Late posts of a name already posted since: coalesced into that post, as notify(3) does.
    package var coalesced: UInt64 = 0
    /// States and wormhole `file` messages equal to what this host has already: nothing to do.
    package var unchanged: UInt64 = 0
    /// Published and not yet acknowledged, now (a gauge: `exported + states-exported +
    /// wormhole-exported = acknowledged + waiting`).
    package var waiting: UInt64 = 0
    package var dropped: UInt64 = 0
    package var refused: UInt64 = 0
    package var invalid: UInt64 = 0
    package var statesLimited: UInt64 = 0
    package var statesSuperseded: UInt64 = 0
    package var statesRepublished: UInt64 = 0

    package var description: String {
        "exported=\(exported) imported=\(imported) states-exported=\(statesExported) states-imported=\(statesImported) "
            + "wormhole-exported=\(wormholeExported) wormhole-imported=\(wormholeImported) duplicates=\(duplicates) "
            + "dropped=\(dropped) refused=\(refused) invalid=\(invalid) states-limited=\(statesLimited) "
            + "states-superseded=\(statesSuperseded) states-republished=\(statesRepublished) "
            + "acknowledged=\(acknowledged) waiting=\(waiting) received=\(received) late=\(late) reordered=\(reordered) coalesced=\(coalesced) unchanged=\(unchanged)"
    }
}

package final class Bridge: MQTTClientDelegate, Sendable {
    package let configuration: BridgeConfiguration
    let center: NotifyCenter
    package let reporter: Reporter
    private let exports: [String]
    private let imports: [String]
    private let myUID = getuid()
    /// Set once in `start`, before any callback can read it.
    private nonisolated(unsafe) var client: MQTTClient!
    private nonisolated(unsafe) var stateWatcher: StateWatcher?
    private nonisolated(unsafe) var mirrors: [WormholeMirror] = []
    /// The local observations of the exported namespaces (made in `start`, before any callback).
    private nonisolated(unsafe) var observations: [NotificationObservation] = []
    /// The bus name that keeps a second bridge of ours off this bus (BusClaim), held while running.
    private nonisolated(unsafe) var claim: BusClaim?
    // nonisolated(unsafe): set once in start(), before the MQTT client runs; read in stop().
    private nonisolated(unsafe) var distributedObservation: DistributedObservation?

    /// The publishing side: the sequence and the publish happen under one lock, so the broker
    /// receives messages in sequence order.
    private let publishing = Mutex<UInt64>(0)
    /// Published, not yet acknowledged (bounded by `queueLimit`).
    private let unacknowledged = Atomic<Int>(0)
    private let counters = Mutex(BridgeCounters())
    private let dedupe = Mutex(Deduplicator())
    /// What the bridge knows of each state it carries (`StateBook`), under one lock: a local
    /// change is compared, recorded, tracked and published in one step, and a remote one is
    /// checked against our own publications and recorded in one step. Two steps with a gap
    /// between let a remote value slip in after we recorded ours but before we tracked it: the
    /// host then kept the remote value while the broker kept ours (BridgeTests.stateConverges).
    private let stateBook = Mutex(StateBook())
    /// Set once the bridge was connected: a later connection with no session means the broker
    /// lost everything (a restart without persistence), retained states included.
    private let everConnected = Atomic<Bool>(false)
    private let connected = Atomic<Bool>(false)
    private let stopping = Atomic<Bool>(false)

    package init(configuration: BridgeConfiguration, reporter: Reporter = Reporter()) throws(BridgeError) {
        self.configuration = configuration
        self.reporter = reporter
        for ns in configuration.exports + configuration.imports {
            if ns == "self" || ns.hasPrefix("self.") {
                throw BridgeError(.configuration, "'\(ns)': self. names never leave their process, so they cannot be bridged")
            }
            // The core's own check, so an import is held to what an export's observer accepts.
            do { try NotifyCenter.validate(namespace: ns) } catch { throw BridgeError(.configuration, error.message) }
        }
        exports = Namespaces.minimal(configuration.exports)
        imports = Namespaces.minimal(configuration.imports)
        do {
            center = if let bus = configuration.bus { try NotifyCenter(bus: bus) } else { .default }
        } catch {
            throw BridgeError(.localBus, "cannot use the bus \(configuration.bus ?? "(default)"): \(error)")
        }
    }

    package var currentCounters: BridgeCounters {
        var now = counters.withLock { $0 }
        now.waiting = UInt64(max(0, unacknowledged.load(ordering: .relaxed)))
        return now
    }

    // MARK: Starting

    package func start() throws(BridgeError) {
        switch try BusClaim.claim(bus: configuration.bus) {
        case .claimed(let held): claim = held
        case .denied(let why): reporter.say(why)
        }
        let mqttClient: MQTTClient
        do { mqttClient = try MQTTClient(options: configuration.mqtt, delegate: self) } catch {
            throw BridgeError(.broker, "\(error)")
        }
        client = mqttClient
        for group in configuration.wormholeGroups {
            do {
                mirrors.append(try WormholeMirror(bridge: self, group: group, directory: configuration.wormholeDirectory,
                                                  listenerName: configuration.wormholeListener, center: center))
            } catch {
                throw BridgeError(.wormhole, "cannot mirror wormhole group '\(group)': \(error)")
            }
        }
        // Observe before connecting: a post made while the broker is still away is queued.
        var observed = exports
        if !mirrors.isEmpty { observed.append(WormholeMirror.announcementNamespace) }
        for ns in Namespaces.minimal(observed) { try observeLocally(ns) }
        if !exports.isEmpty { try observeDistributed() }
        if !exports.isEmpty { try watchStates() }
        do { try mqttClient.start(options: configuration.mqtt) } catch { throw BridgeError(.broker, "\(error)") }
        for mirror in mirrors { mirror.start() }
    }

    package func stop() {
        stopping.store(true, ordering: .relaxed)
        for observation in observations { observation.cancel() }
        distributedObservation?.cancel()
        client?.stop()
        stateWatcher?.stop()
        for mirror in mirrors { mirror.stop() }
    }

    private func observeLocally(_ ns: String) throws(BridgeError) {
        do {
            observations.append(try center.observePosts(namespace: ns) { [self] post in localPost(post) })
        } catch {
            throw BridgeError(.localBus, "cannot observe '\(ns)' on the local bus: \(error.message)")
        }
    }

    /// Every distributed notification of the local bus (one rule), exported when in an exported
    /// namespace; the bridge's own imports (posted by its center) are skipped.
    private func observeDistributed() throws(BridgeError) {
        do {
            distributedObservation = try center.observeDistributed(nil) { [weak self] note in
                if !note.isFromThisCenter { self?.localDistributed(note) }
            }
        } catch {
            throw BridgeError(.localBus, "cannot observe distributed notifications on the local bus: \(error.message)")
        }
    }

    private func watchStates() throws(BridgeError) {
        let directory: String
        do { directory = try NotifyCenter.stateDirectory(bus: configuration.bus) } catch {
            throw BridgeError(.stateDirectory, "cannot find the bus's state directory: \(error.message)")
        }
        let watcher = StateWatcher(directory: directory, uid: myUID) { [weak self] name in self?.localStateChanged(name) }
        do { try watcher.start() } catch {
            throw BridgeError(.stateDirectory, "cannot watch the state directory \(directory): \(error)")
        }
        stateWatcher = watcher
        // What was set before the bridge started, for names only this side writes (a name both
        // exported and imported takes the broker's retained value instead of overwriting it).
        for name in watcher.namesPresent() where !isImported(name) { localStateChanged(name) }
    }

    // MARK: Local → broker

    /// A distributed notification on the local bus (the center's delivery thread): out whole, as
    /// its Distributed Post marshalled (name, object, userInfo, options; docs/BRIDGE.md).
    private func localDistributed(_ note: DistributedNote) {
        guard isExported(note.name), let bytes = note.marshalled() else { return } // marshalled only when it goes out
        if publish(topic: TopicCodec.distributedTopic(note.name), body: .distributed(bytes)) {
            counters.withLock { $0.exported += 1 }
        }
    }

    /// A post on the local bus (the center's delivery thread).
    private func localPost(_ post: DeliveredPost) {
        guard !post.fromThisCenter else { return }
        let name = post.name
        if !mirrors.isEmpty, let (mirror, identifier) = mirrorFor(announcement: name) {
            mirror.localAnnouncement(identifier)
        }
        guard isExported(name) else { return }
        guard mayCarry(name, direction: "export") else { return }
        // A poster often sets the state, then posts, and its observers read the state when the
        // post arrives: so a changed state goes out before the post (the watcher may not have
        // seen it yet; it then finds it known).
        localStateChanged(name, quiet: true)
        if publish(topic: TopicCodec.postTopic(name), body: .post) {
            counters.withLock { $0.exported += 1 }
        }
    }

    /// Publishes the state of `name` (retained) when it differs from the last one known. A
    /// name never seen with a state other than 0 has nothing to say. Another thread (the
    /// watcher, a post's delivery, an import) may change the file between our read and our
    /// publication: so after a publication the value is read again, and a different one is
    /// handled in turn. A value found known publishes nothing and needs no second read (the
    /// common case, once per exported post): a later write brings its own watcher event.
    private func localStateChanged(_ name: String, quiet: Bool = false) {
        guard isExported(name), mayCarry(name, direction: "export", quiet: quiet) else { return }
        let tracked = isImported(name)
        guard var value = try? center.state(of: name) else { return }
        // Bounded: a writer that never stops is met again by the watcher, one event per write.
        for _ in 0 ..< 4 {
            guard publishStateIfChanged(name, value, tracked: tracked) else { return }
            guard let now = try? center.state(of: name), now != value else { return }
            value = now
        }
    }

    /// Compares, records, tracks and publishes under the book's lock, so publications of one
    /// name leave in the order they were recorded. The publish only queues for the MQTT
    /// thread: nothing under this lock waits for the broker. True when it was news.
    @discardableResult
    private func publishStateIfChanged(_ name: String, _ value: UInt64, tracked: Bool, always: Bool = false) -> Bool {
        stateBook.withLock { book in
            let now = DispatchTime.now().uptimeNanoseconds
            guard book.recordLocal(name, value, tracked: tracked, now: now, always: always) else { return false }
            if publish(topic: TopicCodec.stateTopic(name), body: .state(value), retain: true) {
                counters.withLock { $0.statesExported += 1 }
            } else if tracked {
                book.echoed(name) // dropped: no echo will come for it
            }
            return true
        }
    }

    /// Publishes with the next sequence number; false (and reported) when it was dropped.
    @discardableResult
    func publish(topic: String, body: BridgePayload.Body, retain: Bool = false) -> Bool {
        publishing.withLock { sequence in
            guard unacknowledged.load(ordering: .relaxed) < configuration.queueLimit else {
                let dropped = counters.withLock { $0.dropped += 1; return $0.dropped }
                reporter.repeated("dropped", "dropped a message for \(topic): \(configuration.queueLimit) published messages are not yet acknowledged (queue limit; the broker is unreachable or slow); \(dropped) dropped")
                return false
            }
            sequence += 1
            let payload = BridgePayload(origin: configuration.origin, sequence: sequence, body: body).encoded()
            do {
                _ = try client.publish(topic: topic, payload: payload, qos: 1, retain: retain)
                unacknowledged.add(1, ordering: .relaxed)
                return true
            } catch {
                counters.withLock { $0.dropped += 1 }
                reporter.repeated("publish", "cannot publish to \(topic): \(error)")
                return false
            }
        }
    }

    // MARK: Broker → local

    package func mqttConnected(broker: BrokerURL, sessionPresent: Bool) {
        connected.store(true, ordering: .relaxed)
        let reconnected = everConnected.exchange(true, ordering: .relaxed)
        reporter.say("connected to the broker at \(broker.host):\(broker.port) as '\(configuration.mqtt.clientID)' (session \(sessionPresent ? "resumed" : "new"))")
        var filters: [String] = []
        for ns in imports {
            filters.append(TopicCodec.filter(root: TopicCodec.postRoot, namespace: ns))
            filters.append(TopicCodec.filter(root: TopicCodec.stateRoot, namespace: ns))
            filters.append(TopicCodec.filter(root: TopicCodec.distributedRoot, namespace: ns))
        }
        filters += mirrors.map(\.filter)
        if filters.isEmpty {
            reporter.say("ready: exporting \(exports.joined(separator: " ")), importing nothing")
            return
        }
        do { try client.subscribe(filters) } catch {
            reporter.say("cannot subscribe: \(error); retrying at the next connection")
        }
        if reconnected && !sessionPresent { republishStates() }
    }

    /// The broker lost our session, so it lost its retained states too (a restart without
    /// persistence): publish again the current value of every state we export, so a host that
    /// joins later does not read 0. Conflicting values settle as any publication does: the last
    /// the broker receives wins everywhere.
    private func republishStates() {
        let names = stateBook.withLock { $0.knownNames }
        var republished: UInt64 = 0
        for name in names where isExported(name) && mayCarry(name, direction: "export", quiet: true) {
            guard let value = try? center.state(of: name) else { continue }
            publishStateIfChanged(name, value, tracked: isImported(name), always: true)
            republished += 1
        }
        if republished > 0 {
            counters.withLock { $0.statesRepublished += republished }
            reporter.say("the broker lost its session: published \(republished) known state\(republished == 1 ? "" : "s") again")
        }
    }

    package func mqttSubscribed(refused: [String], retryInSeconds: Double) {
        guard refused.isEmpty else {
            // Never "ready" over a hole: what is published there would never arrive, unsaid.
            let filters = refused.map { "'\($0)'" }.joined(separator: ", ")
            reporter.repeated("subscription-refused", "the broker refused the subscription to \(filters): nothing published there is imported until it accepts; asking again in \(Int(retryInSeconds)) s (the broker's ACL must let this client read it: docs/BRIDGE.md, the ACL under \"user.uid.N\"; a NATS cluster refuses one for a while after it lost a node)")
            return
        }
        reporter.say("ready: exporting \(exports.isEmpty ? "nothing" : exports.joined(separator: " ")), importing \(imports.isEmpty ? "nothing" : imports.joined(separator: " "))\(mirrors.isEmpty ? "" : ", mirroring wormhole \(configuration.wormholeGroups.joined(separator: " "))")")
    }

    package func mqttDisconnected(reason: String, refused: Bool) {
        let was = connected.exchange(false, ordering: .relaxed)
        if stopping.load(ordering: .relaxed) { return } // our own disconnect, at stop: nothing was lost
        let queued = unacknowledged.load(ordering: .relaxed)
        // Several brokers: the next one is tried at once, with backoff only once all failed in a row.
        let brokers = configuration.mqtt.brokers.count
        let retry = brokers > 1 ? "trying the next of \(brokers) brokers (with backoff once all failed)" : "retrying with backoff"
        // Summarised per broker and reason: one broker's failures never hide another's.
        if refused {
            reporter.repeated("refused:" + reason, "\(reason); \(retry) (check --username and the password)")
        } else if was {
            let next = brokers > 1 ? "trying the next of \(brokers) brokers" : "reconnecting with backoff"
            reporter.say("lost the broker: \(reason); \(next), \(queued) messages wait (limit \(configuration.queueLimit))")
        } else {
            reporter.repeated("unreachable:" + reason, "\(reason); \(retry), \(queued) messages wait (limit \(configuration.queueLimit))")
        }
    }

    package func mqttAcknowledged(messageID: Int32) {
        unacknowledged.subtract(1, ordering: .relaxed)
        counters.withLock { $0.acknowledged += 1 }
    }

    package func mqttMessage(topic: String, payload bytes: UnsafeRawBufferPointer, retained: Bool) {
        let payload: BridgePayload
        switch BridgePayload.decode(bytes) {
        case .success(let decoded): payload = decoded
        case .failure(let fault):
            counters.withLock { $0.received += 1; $0.invalid += 1 }
            reporter.repeated("invalid:" + topic, "ignored a message on \(topic): \(fault)")
            return
        }
        guard payload.origin != configuration.origin else { // our own, handed back
            if case .state = payload.body, let name = TopicCodec.name(inTopic: topic, root: TopicCodec.stateRoot) {
                stateBook.withLock { $0.echoed(name) }
            }
            return
        }
        counters.withLock { $0.received += 1 }
        if let mirror = mirrors.first(where: { topic.hasPrefix($0.topicPrefix) }) {
            importWormhole(mirror, topic: topic, payload: payload)
        } else if topic.hasPrefix(TopicCodec.postRoot + "/") {
            guard let name = importableName(topic, root: TopicCodec.postRoot) else { return }
            importPost(name, payload, topic: topic)
        } else if topic.hasPrefix(TopicCodec.stateRoot + "/") {
            guard let name = importableName(topic, root: TopicCodec.stateRoot) else { return }
            importState(name, payload, topic: topic)
        } else if topic.hasPrefix(TopicCodec.distributedRoot + "/") {
            guard let name = importableName(topic, root: TopicCodec.distributedRoot) else { return }
            importDistributed(name, payload, topic: topic)
        } else {
            counters.withLock { $0.invalid += 1 }
            reporter.repeated("topic", "ignored a message on \(topic): not a topic this bridge reads (docs/BRIDGE.md, \"Topics\")")
        }
    }

    /// The name a post or state topic carries, when this bridge may import it; otherwise the real
    /// reason is reported (a bad escape, U+0000, a name the core refuses, another namespace) and nil.
    private func importableName(_ topic: String, root: String) -> String? {
        guard let name = TopicCodec.name(inTopic: topic, root: root) else {
            invalid(topic, "not a name's topic: a bad or non-canonical %XX escape, or not UTF-8 (docs/BRIDGE.md, \"Topics\")")
            return nil
        }
        if name.utf8.contains(0) {
            invalid(topic, "the name contains U+0000, which no notification name may hold")
            return nil
        }
        do { try NotifyCenter.validate(name: name) } catch {
            invalid(topic, "the core refuses the name: \(error.message)")
            return nil
        }
        guard isImported(name) else {
            invalid(topic, "'\(name)' is not in an imported namespace")
            return nil
        }
        return name
    }

    private func importPost(_ name: String, _ payload: BridgePayload, topic: String) {
        guard case .post = payload.body else { return invalid(topic, "a post topic carries a \(payload.body.kind)") }
        // A late post of a name posted here since is coalesced into that post, as notify(3)
        // coalesces posts of one name that wait together (docs/BRIDGE.md, "Ordering and loss").
        guard accept(payload, topic: topic, late: .coalesce) else { return }
        guard mayCarry(name, direction: "import") else { return }
        do {
            try center.post(name)
            counters.withLock { $0.imported += 1 }
        } catch {
            counters.withLock { $0.refused += 1 }
            reporter.repeated("post:" + name, "cannot post \(name) locally: \(error.message)")
        }
    }

    /// A distributed notification from the broker: checked as a receiver checks one (the payload is
    /// another host's word), its name must be its topic's, and it is posted on the local bus whole.
    private func importDistributed(_ name: String, _ payload: BridgePayload, topic: String) {
        guard case .distributed(let bytes) = payload.body else { return invalid(topic, "a distributed topic carries a \(payload.body.kind)") }
        guard accept(payload, topic: topic, late: .take) else { return }
        var nameBuffer = [CChar](repeating: 0, count: Int(CNOTIFY_NAME_MAX) + 1)
        var objectBuffer = [CChar](repeating: 0, count: Int(CNOTIFY_NAME_MAX) + 1)
        var userInfo: OpaquePointer?
        var options: UInt32 = 0
        let parsed = bytes.withUnsafeBytes { raw in
            CNotify_protocol_parse_distributed(raw.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(raw.count),
                                               &nameBuffer, &objectBuffer, &userInfo, &options)
        }
        guard parsed == UInt32(NOTIFY_STATUS_OK) else { return invalid(topic, String(cString: CNotify_last_error())) }
        defer { CNotify_plist_free(userInfo) }
        let carried = String(decoding: nameBuffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard carried == name else { return invalid(topic, "the notification inside is '\(carried)', not its topic's name") }
        let object = objectBuffer[0] == 0 ? nil : String(decoding: objectBuffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        do {
            try center.postDistributed(name, object: object, cUserInfo: userInfo,
                                       deliverImmediately: options & UInt32(CNOTIFY_DISTRIBUTED_DELIVER_IMMEDIATELY) != 0)
            counters.withLock { $0.imported += 1 }
        } catch {
            counters.withLock { $0.refused += 1 }
            reporter.repeated("distributed:" + name, "cannot post the distributed notification \(name) locally: \(error.message)")
        }
    }

    private func importState(_ name: String, _ payload: BridgePayload, topic: String) {
        guard case .state(let value) = payload.body else {
            return invalid(topic, "a state topic carries a \(payload.body.kind), not a state value")
        }
        // A state that comes late is an older value of the same origin: superseded by the one
        // taken already (a cluster's redelivery must not set a name back).
        guard accept(payload, topic: topic, late: .supersede) else { return }
        guard mayCarry(name, direction: "import") else { return }
        // In one step: whether the broker received this before our own last value of the name
        // (ours is the later one), whether the name may be imported, and the value recorded
        // (first: the state watcher then sees our own write as known, not as news).
        let verdict = stateBook.withLock { book in
            book.recordRemote(name, value, now: DispatchTime.now().uptimeNanoseconds, limit: configuration.stateLimit)
        }
        let previous: UInt64?
        switch verdict {
        case .superseded:
            counters.withLock { $0.statesSuperseded += 1 }
            return
        case .overLimit:
            counters.withLock { $0.statesLimited += 1 }
            reporter.repeated("state-limit", "did not import the state of \(name): \(configuration.stateLimit) state names were imported already (--state-limit)")
            return
        case .recorded(let before):
            previous = before
        }
        if previous == value, (try? center.state(of: name)) == value {
            counters.withLock { $0.unchanged += 1 }
            return
        }
        do {
            try center.setState(value, for: name)
            counters.withLock { $0.statesImported += 1 }
        } catch {
            stateBook.withLock { $0.restore(name, previous, ifStill: value) }
            counters.withLock { $0.refused += 1 }
            reporter.repeated("state:" + name, "cannot set the state of \(name) locally: \(error.message)")
        }
    }

    private func importWormhole(_ mirror: WormholeMirror, topic: String, payload: BridgePayload) {
        guard case .wormhole(let data) = payload.body else { return invalid(topic, "a wormhole topic carries a \(payload.body.kind)") }
        guard let (kind, identifier) = mirror.parse(topic: topic) else { return invalid(topic, "not a wormhole topic of this group") }
        if kind == .queue, !accept(payload, topic: topic, late: .take) { return }
        do {
            let stored = try mirror.store(data, identifier: identifier, kind: kind)
            counters.withLock { if stored { $0.wormholeImported += 1 } else { $0.unchanged += 1 } }
        } catch {
            counters.withLock { $0.refused += 1 }
            reporter.repeated("wormhole:" + identifier, "cannot store wormhole message '\(identifier)' from \(payload.origin): \(error)")
        }
    }

    /// What a message that comes after a later one of its topic (from its origin) does.
    private enum LateMessage {
        /// Taken: every one counts (a queue message, a distributed notification).
        case take
        /// A post: the later post of its name was made here already; coalesced into it.
        case coalesce
        /// A state: an older value; the later one stays.
        case supersede
    }

    /// Whether to take the message: new, or late as `late` says; every other outcome is counted.
    private func accept(_ payload: BridgePayload, topic: String, late: LateMessage) -> Bool {
        let (verdict, behind) = dedupe.withLock { table in
            let verdict = table.check(origin: payload.origin, topic: topic, sequence: payload.sequence)
            return (verdict, verdict == .new && table.behind(origin: payload.origin, sequence: payload.sequence))
        }
        switch (verdict, late) {
        case (.new, _): if behind { counters.withLock { $0.reordered += 1 } }; return true
        case (.duplicate, _): counters.withLock { $0.duplicates += 1 }; return false
        case (.late, .take): counters.withLock { $0.late += 1 }; return true
        case (.late, .coalesce): counters.withLock { $0.late += 1; $0.coalesced += 1 }; return false
        case (.late, .supersede): counters.withLock { $0.late += 1; $0.statesSuperseded += 1 }; return false
        }
    }

    private func invalid(_ topic: String, _ why: String) {
        counters.withLock { $0.invalid += 1 }
        reporter.repeated("invalid:" + topic, "ignored a message on \(topic): \(why)")
    }

    // MARK: Policy

    func isExported(_ name: String) -> Bool { exports.contains { Namespaces.contains($0, name) } }
    func isImported(_ name: String) -> Bool { imports.contains { Namespaces.contains($0, name) } }

    /// `user.uid.N`: exported only when this bridge's user may post it (N, or root), imported
    /// only when the broker's ACL is declared to guard it and the local core lets us post it.
    private func mayCarry(_ name: String, direction: String, quiet: Bool = false) -> Bool {
        switch NotifyCenter.restriction(of: name) {
        case .none: return true
        case .uid(let uid) where direction == "export" && (myUID == 0 || myUID == uid): return true
        case .uid where direction == "import" && configuration.brokerACLEnforced: return true
        default:
            if quiet { return false }
            counters.withLock { $0.refused += 1 }
            let why = direction == "export"
                ? "this bridge runs as uid \(myUID) and may not post it"
                : "user.uid.N names are imported only with --broker-acl-enforced (docs/BRIDGE.md)"
            reporter.repeated("restricted:" + direction, "did not \(direction) \(name): \(why)")
            return false
        }
    }

    private func mirrorFor(announcement name: String) -> (WormholeMirror, String)? {
        for mirror in mirrors { if let identifier = mirror.identifier(inAnnouncement: name) { return (mirror, identifier) } }
        return nil
    }

    func wormholeExported() { counters.withLock { $0.wormholeExported += 1 } }
}

extension BridgePayload.Body {
    var kind: String {
        switch self {
        case .post: "post"
        case .state: "state"
        case .wormhole: "wormhole message"
        case .distributed: "distributed notification"
        }
    }
}

/// Why the bridge could not start, typed like NotifyError: a code to branch on, and a sentence
/// that says what to do.
package struct BridgeError: Error, Hashable, Sendable, CustomStringConvertible {
    package enum Code: String, Hashable, Sendable {
        /// An option or its value (a namespace, a limit, a file named by an option).
        case configuration
        /// The local bus: unreachable, refusing us, or served by another bridge already.
        case localBus
        /// The MQTT broker or its client.
        case broker
        /// A wormhole group to mirror.
        case wormhole
        /// The state directory of the local bus.
        case stateDirectory
    }

    package let code: Code
    package let message: String

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var description: String { message }
}

extension DistributedNote {
    /// The Distributed Post as our library sends it (nil when out of memory); inside the handler
    /// only, as the note's C copy.
    func marshalled() -> Data? {
        withUnsafeNote { note in
            let n = note.pointee
            var bytes: UnsafeMutablePointer<CChar>?
            var length: Int32 = 0
            guard CNotify_protocol_build_distributed(n.name, n.object, n.user_info, 0, 0, n.options, &bytes, &length) == UInt32(NOTIFY_STATUS_OK),
                  let bytes else { return nil }
            defer { CNotify_protocol_free(bytes) }
            return Data(bytes: bytes, count: Int(length))
        }
    }
}

// MQTT client: libmosquitto behind a small Swift class (one connection at a time to one of several
// brokers, its own network thread, failover to the next broker on a lost connection, backoff once
// every broker failed). Everything MQTT-specific the bridge needs and nothing else; libmosquitto
// does the protocol, we never write MQTT bytes ourselves.
import CMosquitto
import Dispatch
import FoundationEssentials
import Glibc
import Synchronization

/// Where a message from the broker or a connection event is reported. Called on libmosquitto's
/// network thread, one at a time, in the broker's order.
package protocol MQTTClientDelegate: AnyObject, Sendable {
    /// Connected to `broker` (one of the options' brokers); `sessionPresent`: the broker (or its
    /// cluster) kept our session.
    func mqttConnected(broker: BrokerURL, sessionPresent: Bool)
    /// A refused or failed connection attempt, or a lost connection: `reason` says which.
    func mqttDisconnected(reason: String, refused: Bool)
    func mqttMessage(topic: String, payload: UnsafeRawBufferPointer, retained: Bool)
    /// The broker acknowledged a QoS 1 publish (`mid` from `publish`).
    func mqttAcknowledged(messageID: Int32)
    /// The broker answered every filter of one `subscribe` call. `refused`: the filters it
    /// refused (SUBACK 0x80: its ACL, or a cluster that could not set the subscription up), asked
    /// for again after `retryInSeconds` while the connection lasts; empty when it took them all.
    func mqttSubscribed(refused: [String], retryInSeconds: Double)
}

/// In which order a client tries its brokers.
package enum BrokerOrder: String, Sendable, CaseIterable {
    /// As listed: the first one first; after a loss, the next one, round the list.
    case inOrder = "in-order"
    /// A new random order at each round through the list (spreads a fleet's bridges).
    case random
}

package struct MQTTOptions: Sendable {
    /// The brokers, one connection at a time: the same service (a cluster's nodes, or one
    /// broker's several addresses), so a session resumes on any of them. At least one.
    package var brokers: [BrokerURL]
    package var order: BrokerOrder = .inOrder
    /// An attempt that has no answer (CONNACK) within this many seconds moves on to the next broker.
    package var connectTimeoutSeconds: Double = 10
    package var clientID: String
    package var username: String?
    package var password: String?
    /// TLS: a CA file or directory (nil: the system's), and an optional client certificate.
    package var caFile: String?
    package var caPath: String?
    package var certFile: String?
    package var keyFile: String?
    package var keepAliveSeconds: Int32 = 30
    /// Unacknowledged QoS 1 messages on the wire at once (MQTT's receive maximum).
    package var maxInflight: UInt32 = 100

    package init(brokers: [BrokerURL], clientID: String) {
        precondition(!brokers.isEmpty, "MQTTOptions needs at least one broker")
        self.brokers = brokers
        self.clientID = clientID
    }

    package init(broker: BrokerURL, clientID: String) { self.init(brokers: [broker], clientID: clientID) }
}

package struct MQTTError: Error, CustomStringConvertible, Sendable {
    package let code: Int32
    package let description: String

    init(_ code: Int32, _ what: String) {
        self.code = code
        description = "\(what): \(String(cString: mosquitto_strerror(code)))"
    }

    init(message: String) {
        code = -1
        description = message
    }
}

/// One libmosquitto connection. `Sendable` because libmosquitto's calls are thread-safe once its
/// network thread runs (`mosquitto_loop_start`); the handle is set in `init` and freed in `deinit`
/// only, so `nonisolated(unsafe)` states exactly that.
package final class MQTTClient: Sendable {
    private nonisolated(unsafe) let handle: OpaquePointer
    private let delegateBox: Mutex<(any MQTTClientDelegate)?>
    private let started = Atomic<Bool>(false)
    /// Set by a successful CONNACK, read (and cleared) by the loop to reset its backoff.
    private let connectedOnce = Atomic<Bool>(false)
    /// The broker of the current attempt (set by the network thread before it connects).
    private let current = Mutex<BrokerURL?>(nil)
    private let loopEnded = DispatchSemaphore(value: 0)
    /// SUBSCRIBE packets of this connection not yet acknowledged: message id → filter.
    private let awaitingSubAck = Mutex<[Int32: String]>([:])
    /// Filters the broker refused on this connection, and when to ask for them again.
    private let refusals = Mutex(Refusals())

    /// A broker may refuse a subscription (SUBACK 0x80) for good (its ACL) or for a while (a NATS
    /// cluster that lost a node); either way it is said, never taken for a subscription, and asked
    /// for again: after 1 s, doubling to 30 s, for as long as the connection lasts.
    struct Refusals {
        var filters: [String] = []
        var retryAt: UInt64 = 0
        var delay = 1.0
        /// Of the `subscribe` call being answered.
        var pending: [String] = []
    }

    private static let libraryReady: Bool = { mosquitto_lib_init() == MOSQ_ERR_SUCCESS.rawValue }()

    package init(options: MQTTOptions, delegate: any MQTTClientDelegate) throws(MQTTError) {
        guard Self.libraryReady else { throw MQTTError(message: "libmosquitto did not initialise") }
        delegateBox = Mutex(delegate)
        // A persistent session (clean session off): the broker keeps our subscriptions and queues
        // QoS 1 messages for us while we are away (docs/BRIDGE.md, "Ordering and loss").
        guard let handle = mosquitto_new(options.clientID, false, nil) else {
            throw MQTTError(message: "cannot create an MQTT client (client id '\(options.clientID)')")
        }
        self.handle = handle
        mosquitto_user_data_set(handle, Unmanaged.passUnretained(self).toOpaque())
        _ = mosquitto_int_option(handle, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311)
        mosquitto_max_inflight_messages_set(handle, options.maxInflight)
        var rc: Int32
        if options.username != nil || options.password != nil {
            rc = mosquitto_username_pw_set(handle, options.username, options.password)
            guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw MQTTError(rc, "cannot set the credentials") }
        }
        if options.brokers.contains(where: \.tls) { // one TLS setting for the handle: all or none (BridgeArguments)
            let useSystemCAs = options.caFile == nil && options.caPath == nil
            rc = mosquitto_tls_set(handle, options.caFile, useSystemCAs ? "/etc/ssl/certs" : options.caPath,
                                   options.certFile, options.keyFile, nil)
            guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw MQTTError(rc, "cannot set up TLS") }
        }
        mosquitto_connect_with_flags_callback_set(handle) { _, context, rc, flags in
            MQTTClient.from(context)?.connected(rc: rc, flags: flags)
        }
        mosquitto_disconnect_callback_set(handle) { _, context, rc in
            MQTTClient.from(context)?.delegate?.mqttDisconnected(
                reason: rc == 0 ? "disconnected" : "connection lost (\(String(cString: mosquitto_strerror(rc))))",
                refused: false)
        }
        mosquitto_message_callback_set(handle) { _, context, message in
            guard let client = MQTTClient.from(context), let message = message?.pointee, let topic = message.topic
            else { return }
            let payload = UnsafeRawBufferPointer(start: message.payload, count: Int(message.payloadlen))
            client.delegate?.mqttMessage(topic: String(cString: topic), payload: payload, retained: message.retain)
        }
        mosquitto_subscribe_callback_set(handle) { _, context, mid, count, granted in
            guard let client = MQTTClient.from(context) else { return }
            // One filter per SUBSCRIBE (`subscribe`): its one granted QoS, or 0x80 for a refusal.
            let refused = count < 1 || granted.map { $0[0] > 2 } ?? true
            client.subAcknowledged(mid: mid, refused: refused)
        }
        mosquitto_publish_callback_set(handle) { _, context, mid in
            MQTTClient.from(context)?.delegate?.mqttAcknowledged(messageID: mid)
        }
    }

    deinit {
        stop()
        mosquitto_destroy(handle)
    }

    private var delegate: (any MQTTClientDelegate)? { delegateBox.withLock { $0 } }

    private static func from(_ context: UnsafeMutableRawPointer?) -> MQTTClient? {
        context.map { Unmanaged<MQTTClient>.fromOpaque($0).takeUnretainedValue() }
    }

    /// One SUBACK: once the last filter of the call is answered, the delegate hears which were
    /// refused, and those are asked for again later.
    private func subAcknowledged(mid: Int32, refused: Bool) {
        let (filter, last) = awaitingSubAck.withLock { waiting in (waiting.removeValue(forKey: mid), waiting.isEmpty) }
        guard let filter else { return } // of an earlier connection
        let answer = refusals.withLock { state -> (filters: [String], delay: Double)? in
            if refused { state.pending.append(filter) }
            guard last else { return nil }
            let filters = state.pending
            state.pending = []
            state.filters = filters
            if filters.isEmpty { return ([], 0) }
            let delay = state.delay
            state.retryAt = DispatchTime.now().uptimeNanoseconds + UInt64(delay * 1e9)
            state.delay = min(delay * 2, 30)
            return (filters, delay)
        }
        if let answer { delegate?.mqttSubscribed(refused: answer.filters, retryInSeconds: answer.delay) }
    }

    /// Asks again for the refused filters once their time came (the network thread, connected).
    private func retryRefusedSubscriptions() {
        let due = refusals.withLock { state -> [String] in
            guard !state.filters.isEmpty, DispatchTime.now().uptimeNanoseconds >= state.retryAt else { return [] }
            defer { state.filters = [] }
            return state.filters
        }
        guard !due.isEmpty else { return }
        // A failure here means the connection is going: the next one subscribes to everything anew.
        try? subscribe(due)
    }

    private func connected(rc: Int32, flags: Int32) {
        if rc == 0 {
            // A new connection subscribes anew: nothing of the last one is awaited or retried.
            awaitingSubAck.withLock { $0.removeAll() }
            refusals.withLock { $0 = Refusals() }
            connectedOnce.store(true, ordering: .relaxed)
            guard let broker = current.withLock({ $0 }) else { return }
            delegate?.mqttConnected(broker: broker, sessionPresent: flags & 1 != 0)
        } else {
            // CONNACK refusals: 4 bad user name or password, 5 not authorised, …
            delegate?.mqttDisconnected(reason: "the broker refused the connection: \(String(cString: mosquitto_connack_string(rc)))",
                                       refused: true)
        }
    }

    /// Starts connecting on the client's network thread. The brokers are tried one after another
    /// (as listed, or in a random order per round); a lost connection moves on to the next one at
    /// once, and once every broker failed in a row the client backs off (1 s doubling to 30 s)
    /// before the next round. Every failed attempt is reported through the delegate. Our own loop
    /// rather than `mosquitto_loop_start`, whose thread gives up when the very first connection
    /// fails (libmosquitto 2.0), so a bridge started before its broker would wait forever.
    package func start(options: MQTTOptions) throws(MQTTError) {
        guard !started.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let rc = mosquitto_threaded_set(handle, true)
        guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw MQTTError(rc, "cannot make the MQTT client thread-safe") }
        BackgroundThread.start(name: "bridge MQTT") { [self] in networkLoop(options) }
    }

    /// Connects, runs libmosquitto's loop while connected, and fails over after a loss.
    private func networkLoop(_ options: MQTTOptions) {
        defer { loopEnded.signal() }
        var rotation = BrokerRotation(options.brokers, order: options.order)
        var delay = 1.0
        while started.load(ordering: .acquiring) {
            let broker = rotation.current
            current.withLock { $0 = broker }
            // Connect (not reconnect): the host may differ from the last attempt's. libmosquitto
            // keeps its queue of unacknowledged QoS 1 messages across it and resends them.
            let rc = mosquitto_connect(handle, broker.host, Int32(broker.port), options.keepAliveSeconds)
            var answered = false
            if rc == MOSQ_ERR_SUCCESS.rawValue {
                let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(options.connectTimeoutSeconds * 1e9)
                var loop = MOSQ_ERR_SUCCESS.rawValue
                while loop == MOSQ_ERR_SUCCESS.rawValue, started.load(ordering: .acquiring) {
                    loop = mosquitto_loop(handle, 100, 1)
                    if !answered { answered = connectedOnce.load(ordering: .relaxed) }
                    if answered, loop == MOSQ_ERR_SUCCESS.rawValue { retryRefusedSubscriptions() }
                    if !answered, DispatchTime.now().uptimeNanoseconds > deadline {
                        delegate?.mqttDisconnected(
                            reason: "no answer from the broker at \(broker.host):\(broker.port) within \(options.connectTimeoutSeconds) s", refused: false)
                        mosquitto_disconnect(handle)
                        _ = mosquitto_loop(handle, 10, 1) // lets the disconnect go out
                        break
                    }
                }
                if connectedOnce.exchange(false, ordering: .relaxed) { delay = 1 } // it worked for a while: start over
            } else {
                delegate?.mqttDisconnected(
                    reason: "cannot reach the broker at \(broker.host):\(broker.port) (\(reason(rc)))", refused: false)
            }
            guard started.load(ordering: .acquiring) else { break }
            // A broker that answered and then went away: the next one at once. A round of
            // brokers that all failed: back off, waking every 100 ms to notice stop().
            if rotation.advance(connected: answered) { continue }
            let until = DispatchTime.now().uptimeNanoseconds + UInt64(delay * 1e9)
            while started.load(ordering: .acquiring), DispatchTime.now().uptimeNanoseconds < until { usleep(100_000) }
            delay = min(delay * 2, 30)
        }
    }

    private func reason(_ rc: Int32) -> String {
        rc == MOSQ_ERR_ERRNO.rawValue ? String(cString: strerror(errno)) : String(cString: mosquitto_strerror(rc))
    }

    /// Publishes; QoS 1 messages are queued by libmosquitto while the broker is away and sent in
    /// order once it is back. Returns the message id that `mqttAcknowledged` will report.
    package func publish(topic: String, payload: [UInt8], qos: Int32 = 1, retain: Bool = false) throws(MQTTError) -> Int32 {
        var mid: Int32 = 0
        let rc = payload.withUnsafeBytes { bytes in
            mosquitto_publish(handle, &mid, topic, Int32(bytes.count), bytes.baseAddress, qos, retain)
        }
        // libmosquitto keeps a QoS 1 message it could not send for want of a connection (it
        // says MOSQ_ERR_NO_CONN) in its outgoing queue, and sends it, in order, once it is
        // connected again: queued, not failed (docs/BRIDGE.md, "Ordering and loss").
        guard rc == MOSQ_ERR_SUCCESS.rawValue || (rc == MOSQ_ERR_NO_CONN.rawValue && qos > 0) else {
            throw MQTTError(rc, "cannot publish to '\(topic)'")
        }
        return mid
    }

    /// Subscribes with QoS 1, one SUBSCRIBE per filter; `mqttSubscribed` follows once the broker
    /// answered them all. Called on the network thread (from `mqttConnected`, or to retry a
    /// refusal), so no answer can come before its filter is recorded.
    package func subscribe(_ filters: [String], qos: Int32 = 1) throws(MQTTError) {
        for filter in filters {
            var mid: Int32 = 0
            let rc = mosquitto_subscribe(handle, &mid, filter, qos)
            guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw MQTTError(rc, "cannot subscribe to '\(filter)'") }
            awaitingSubAck.withLock { $0[mid] = filter }
        }
    }

    /// Stops the network thread after a clean disconnect (queued messages are dropped).
    package func stop() {
        guard started.exchange(false, ordering: .acquiringAndReleasing) else { return }
        mosquitto_disconnect(handle)
        loopEnded.wait()
    }
}

/// Which broker to try next. A round is one attempt at each broker; `advance` says whether the
/// next attempt may follow at once (the round is not over) or after a back-off (every broker of
/// the round failed without a connection).
package struct BrokerRotation: Sendable {
    private var brokers: [BrokerURL]
    private let order: BrokerOrder
    private var index = 0
    /// Attempts in a row that got no connection.
    private var failures = 0

    package init(_ brokers: [BrokerURL], order: BrokerOrder) {
        self.brokers = order == .random ? brokers.shuffled() : brokers
        self.order = order
    }

    package var current: BrokerURL { brokers[index] }

    /// Moves to the next broker; true when it may be tried at once.
    package mutating func advance(connected: Bool) -> Bool {
        failures = connected ? 0 : failures + 1
        index += 1
        if index == brokers.count {
            index = 0
            if order == .random { brokers.shuffle() }
        }
        // After a connection that ended: the next broker at once, unless it is the same one.
        // After failures: at once until a whole round failed.
        if connected { return brokers.count > 1 }
        if failures >= brokers.count {
            failures = 0
            return false
        }
        return true
    }
}

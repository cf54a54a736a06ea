// Launch: from the command line's words to a BridgeConfiguration (notify-bridge's checks live
// here, so the executable stays a thin argument parser).
import DarwinNotify
import FoundationEssentials
import Glibc

/// The command line's words: the broker connection's, and the ``BridgeOptions`` the bridge runs with.
@dynamicMemberLookup
package struct BridgeArguments: Sendable {
    package var options = BridgeOptions()
    /// The `--broker` words: each a URL or a comma-separated list of them (the same service).
    package var brokers: [String]
    /// `--broker-order`: `in-order` (the default) or `random`.
    package var brokerOrder: String?
    /// `--connect-timeout`: seconds an attempt may wait for the broker's CONNACK.
    package var connectTimeout: Double = 10
    package var tls = false
    package var caFile: String?
    package var caPath: String?
    package var certFile: String?
    package var keyFile: String?
    package var username: String?
    package var passwordFile: String?
    package var clientID: String?

    package init(brokers: [String]) { self.brokers = brokers }

    package init(broker: String) { self.init(brokers: [broker]) }

    package subscript<Value>(dynamicMember option: WritableKeyPath<BridgeOptions, Value>) -> Value {
        get { options[keyPath: option] }
        set { options[keyPath: option] = newValue }
    }

    package func configuration() throws(BridgeError) -> BridgeConfiguration {
        var urls = try Self.brokerURLs(brokers)
        let useTLS = urls.contains(where: \.tls) || tls || caFile != nil || caPath != nil
        for i in urls.indices { urls[i].tls = useTLS }
        var mqtt = MQTTOptions(brokers: urls, clientID: clientID ?? Self.defaultClientID(bus: options.bus))
        if let brokerOrder {
            guard let order = BrokerOrder(rawValue: brokerOrder) else {
                throw BridgeError(.configuration, "--broker-order '\(brokerOrder)' is not in-order or random")
            }
            mqtt.order = order
        }
        guard connectTimeout.isFinite, connectTimeout >= 0.1, connectTimeout <= 3600 else {
            throw BridgeError(.configuration, "--connect-timeout \(connectTimeout) is not a number of seconds from 0.1 to 3600")
        }
        mqtt.connectTimeoutSeconds = connectTimeout
        mqtt.caFile = caFile
        mqtt.caPath = caPath
        mqtt.certFile = certFile
        mqtt.keyFile = keyFile
        guard (certFile == nil) == (keyFile == nil) else {
            throw BridgeError(.configuration, "--tls-cert and --tls-key go together")
        }
        for file in [caFile, certFile, keyFile].compactMap({ $0 }) where access(file, R_OK) != 0 {
            throw BridgeError(.configuration, "cannot read \(file): \(String(cString: strerror(errno)))")
        }
        mqtt.username = username
        if let passwordFile {
            guard let text = try? String(contentsOfFile: passwordFile, encoding: .utf8) else {
                throw BridgeError(.configuration, "cannot read the password file \(passwordFile): \(String(cString: strerror(errno)))")
            }
            mqtt.password = String(text.drop { $0.isNewline }.reversed().drop { $0.isNewline }.reversed())
        }
        guard let id = mqtt.clientID.utf8.count > 0 ? mqtt.clientID : nil, id.utf8.count <= 65535,
              !id.contains("+"), !id.contains("#"), !id.contains("/") else {
            throw BridgeError(.configuration, "--client-id '\(mqtt.clientID)' is empty or holds / + #")
        }
        guard !options.exports.isEmpty || !options.imports.isEmpty || !options.wormholeGroups.isEmpty else {
            throw BridgeError(.configuration, "nothing to carry: give --export, --import or --wormhole")
        }
        guard options.queueLimit > 0 else { throw BridgeError(.configuration, "--queue-limit must be at least 1") }
        guard options.stateLimit > 0 else { throw BridgeError(.configuration, "--state-limit must be at least 1") }
        var configuration = BridgeConfiguration(mqtt: mqtt, origin: Self.newOrigin())
        configuration.options = options
        return configuration
    }

    /// The brokers of the `--broker` words, in order. One TLS setting serves every connection, so
    /// `mqtt://` and `mqtts://` do not mix; a broker listed twice is a mistake worth a sentence.
    package static func brokerURLs(_ words: [String]) throws(BridgeError) -> [BrokerURL] {
        var urls: [BrokerURL] = []
        for word in words {
            for item in word.split(separator: ",", omittingEmptySubsequences: false) {
                let text = String(item.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
                guard !text.isEmpty else { throw BridgeError(.configuration, "--broker '\(word)' has an empty item") }
                let url: BrokerURL
                do { url = try BrokerURL(parsing: text) } catch { throw BridgeError(.configuration, "\(error)") }
                guard !urls.contains(url) else { throw BridgeError(.configuration, "broker \(text) is listed twice") }
                urls.append(url)
            }
        }
        guard let first = urls.first else { throw BridgeError(.configuration, "no broker: give --broker mqtt://HOST[:PORT]") }
        guard urls.allSatisfy({ $0.tls == first.tls }) else {
            throw BridgeError(.configuration, "the brokers mix mqtt:// and mqtts://: one TLS setting serves them all")
        }
        guard urls.count <= 64 else { throw BridgeError(.configuration, "\(urls.count) brokers: at most 64") }
        return urls
    }

    /// Stable across runs (the broker keeps a persistent session under it): host, user and bus.
    package static func defaultClientID(bus: String?) -> String {
        let digest = NotifyCenter.stateFileName(of: bus ?? "default") // a stable 128-bit hash of a string
        return "notify-bridge-\(hostToken())-\(getuid())-\(digest.prefix(8))"
    }

    /// This run's origin: the host and 8 random hex digits.
    package static func newOrigin() -> String {
        "\(hostToken())-\(String(UInt32.random(in: 0 ... .max), radix: 16))"
    }

    private static func hostToken() -> String {
        var name = [CChar](repeating: 0, count: 256)
        gethostname(&name, name.count - 1)
        let host = text(of: name).filter { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }
        return host.isEmpty ? "host" : String(host.prefix(40))
    }
}

/// The text of a NUL-terminated C buffer.
func text(of buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

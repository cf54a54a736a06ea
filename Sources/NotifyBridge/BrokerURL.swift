// Broker URL: `mqtt://host[:port]` or `mqtts://host[:port]` (TLS), as mosquitto_pub -L writes
// them; a user name or password in the URL is refused (they belong in --username and a file).
package struct BrokerURL: Equatable, Sendable {
    package var host: String
    package var port: Int
    package var tls: Bool

    package struct Fault: Error, Equatable, CustomStringConvertible {
        package let description: String
    }

    package init(host: String, port: Int, tls: Bool) {
        self.host = host
        self.port = port
        self.tls = tls
    }

    package init(parsing text: String) throws(Fault) {
        let scheme: Substring
        let rest: Substring
        if let range = text.firstRange(of: "://") {
            scheme = text[..<range.lowerBound]
            rest = text[range.upperBound...]
        } else {
            throw Fault(description: "broker URL '\(text)' has no scheme: write mqtt://HOST[:PORT] or mqtts://HOST[:PORT]")
        }
        switch scheme.lowercased() {
        case "mqtt": tls = false
        case "mqtts": tls = true
        default: throw Fault(description: "broker URL '\(text)': scheme '\(scheme)' is not mqtt or mqtts")
        }
        var authority = rest
        if authority.hasSuffix("/") { authority = authority.dropLast() }
        guard !authority.contains("/"), !authority.contains("?"), !authority.contains("#") else {
            throw Fault(description: "broker URL '\(text)' has a path; write only mqtt://HOST[:PORT]")
        }
        guard !authority.contains("@") else {
            throw Fault(description: "broker URL '\(text)' holds credentials; use --username and --password-file")
        }
        var hostPart = authority
        var portPart: Substring?
        if authority.hasPrefix("[") { // [IPv6]:port
            guard let close = authority.firstIndex(of: "]") else {
                throw Fault(description: "broker URL '\(text)': unclosed '[' in the host")
            }
            hostPart = authority[authority.index(after: authority.startIndex) ..< close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.first == ":" else { throw Fault(description: "broker URL '\(text)': junk after ']'") }
                portPart = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: ":") {
            hostPart = authority[..<colon]
            portPart = authority[authority.index(after: colon)...]
        }
        guard !hostPart.isEmpty, hostPart.utf8.count <= 253,
              hostPart.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == ":" || $0 == "_" })
        else {
            throw Fault(description: "broker URL '\(text)' has no valid host")
        }
        host = String(hostPart)
        if let portPart {
            guard let port = Int(portPart), (1 ... 65535).contains(port) else {
                throw Fault(description: "broker URL '\(text)': port '\(portPart)' is not a number from 1 to 65535")
            }
            self.port = port
        } else {
            port = tls ? 8883 : 1883
        }
    }
}

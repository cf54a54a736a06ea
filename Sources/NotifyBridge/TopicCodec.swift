// Topic codec: notification names ↔ MQTT topics (docs/BRIDGE.md, "Topics").
//
// A name's dots become topic levels, so MQTT's own wildcards select namespaces: `com.example`
// observed as a namespace is the filter `darwin-notify/com/example/#`, which matches the topic of
// `com.example` itself and of every `com.example.*`, never `com.examples`. Bytes a topic cannot
// hold, or that would change its meaning, are written `%XX` (two upper-case hex digits):
// `/` `+` `#` `%`, the space, the C0 controls and DEL, and the C1 controls (U+0080–U+009F, whose
// UTF-8 bytes are escaped one by one); in a single level (a wormhole group, directory or
// identifier) the dot too. No topic holds a `.` or a space: NATS's MQTT listener (before 2.10)
// closes the connection of a client that publishes one. Everything else of a (valid UTF-8) name
// is kept as it is, so the mapping is one-to-one and readable in `mosquitto_sub -v`.
package enum TopicCodec {
    /// The root of post topics: `darwin-notify/<name levels>` (the issue's contract).
    package static let postRoot = "darwin-notify"
    /// The root of retained state topics: `darwin-notify-state/<name levels>`.
    package static let stateRoot = "darwin-notify-state"
    /// The root of distributed notification topics: `darwin-notify-distributed/<name levels>`.
    package static let distributedRoot = "darwin-notify-distributed"
    /// The root of wormhole topics: `darwin-notify-wormhole/<group>/<directory>/<file|queue>/<identifier>`.
    package static let wormholeRoot = "darwin-notify-wormhole"

    /// The levels of `name`: dots become `/`, other bytes escaped as above.
    package static func levels(of name: String) -> String { escape(name, dotsSeparateLevels: true) }

    /// A single topic level holding `text` whole (dots escaped as `%2E`): for wormhole groups,
    /// directories and identifiers, which are one level each.
    package static func level(_ text: String) -> String { escape(text, dotsSeparateLevels: false) }

    private static func escape(_ name: String, dotsSeparateLevels: Bool) -> String {
        var out = [UInt8]()
        out.reserveCapacity(name.utf8.count)
        var previous: UInt8 = 0
        for byte in name.utf8 {
            if byte == UInt8(ascii: ".") {
                if dotsSeparateLevels { out.append(UInt8(ascii: "/")) } else { appendEscape(byte, to: &out) }
            } else if needsEscape(byte, after: previous) {
                // A C1 control is two bytes (C2 80…C2 9F): its lead byte was already kept, so
                // escape it retroactively together with this one.
                if byte >= 0x80, byte <= 0x9F, previous == 0xC2, out.last == 0xC2 {
                    out.removeLast()
                    appendEscape(0xC2, to: &out)
                }
                appendEscape(byte, to: &out)
            } else {
                out.append(byte)
            }
            previous = byte
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The name whose `levels(of:)` is `levels`; nil when it is not such a string (a bad escape,
    /// a byte that should have been escaped, not UTF-8).
    package static func name(fromLevels levels: Substring) -> String? {
        var out = [UInt8]()
        var bytes = Array(levels.utf8)[...]
        var previous: UInt8 = 0
        while let byte = bytes.popFirst() {
            switch byte {
            case UInt8(ascii: "/"): out.append(UInt8(ascii: "."))
            case UInt8(ascii: "%"):
                guard bytes.count >= 2, let high = hexValue(bytes.popFirst()!), let low = hexValue(bytes.popFirst()!)
                else { return nil }
                out.append(high << 4 | low)
            case UInt8(ascii: "."): return nil // a level never holds a raw dot
            default:
                if needsEscape(byte, after: previous) { return nil }
                out.append(byte)
            }
            previous = byte
        }
        guard !out.isEmpty, let text = String(validating: out, as: UTF8.self) else { return nil }
        // One spelling per name: an escape of a byte that is never escaped (`%2E` for a dot,
        // `%41` for A) is refused, so two topics never carry one name.
        guard escape(text, dotsSeparateLevels: true).utf8.elementsEqual(levels.utf8) else { return nil }
        return text
    }

    /// The text of one level that `level(_:)` made; nil when it is not one.
    package static func text(fromLevel level: Substring) -> String? {
        guard !level.contains("/") else { return nil }
        var out = [UInt8]()
        var bytes = Array(level.utf8)[...]
        while let byte = bytes.popFirst() {
            if byte == UInt8(ascii: "%") {
                guard bytes.count >= 2, let high = hexValue(bytes.popFirst()!), let low = hexValue(bytes.popFirst()!)
                else { return nil }
                out.append(high << 4 | low)
            } else {
                out.append(byte)
            }
        }
        guard let text = String(validating: out, as: UTF8.self),
              escape(text, dotsSeparateLevels: false).utf8.elementsEqual(level.utf8) else { return nil }
        return text
    }

    /// The topic of a post of `name`.
    package static func postTopic(_ name: String) -> String { postRoot + "/" + levels(of: name) }
    /// The retained state topic of `name`.
    package static func stateTopic(_ name: String) -> String { stateRoot + "/" + levels(of: name) }
    /// The topic of a distributed notification of `name`.
    package static func distributedTopic(_ name: String) -> String { distributedRoot + "/" + levels(of: name) }

    /// The subscription that selects the namespace `ns` under `root` (`ns` itself and below).
    package static func filter(root: String, namespace ns: String) -> String { root + "/" + levels(of: ns) + "/#" }

    /// The name a topic under `root` carries, nil for another root or a topic that is not ours.
    package static func name(inTopic topic: String, root: String) -> String? {
        let prefix = root + "/"
        guard topic.hasPrefix(prefix) else { return nil }
        return name(fromLevels: topic.dropFirst(prefix.count))
    }

    private static func needsEscape(_ byte: UInt8, after previous: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "/"), UInt8(ascii: "+"), UInt8(ascii: "#"), UInt8(ascii: "%"): return true
        case 0x00 ... 0x20, 0x7F: return true // the C0 controls, the space, DEL
        case 0x80 ... 0x9F: return previous == 0xC2 // the second byte of a C1 control
        default: return false
        }
    }

    private static func appendEscape(_ byte: UInt8, to out: inout [UInt8]) {
        let hex = Array("0123456789ABCDEF".utf8)
        out.append(UInt8(ascii: "%"))
        out.append(hex[Int(byte >> 4)])
        out.append(hex[Int(byte & 0xF)])
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0") ... UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "A") ... UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil // lower-case hex is not what we write: one spelling per name
        }
    }
}

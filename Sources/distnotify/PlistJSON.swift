// PlistJSON.swift: a userInfo given as JSON to the C core's property list, and a received one back
// to JSON. JSON has no data or dates: they are written {"$data": "<base64>"} and
// {"$date": <seconds since 1970>}, both ways. A number with a fraction or exponent is a real,
// any other an integer (64-bit: past that it is refused, never rounded). null has no property-list
// form and is refused.
import CNotify
import DarwinNotify
import CommandLineSupport

struct PlistJSONError: Error, CustomStringConvertible {
    let description: String
}

/// An owned C property list.
final class OwnedPlist {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { CNotify_plist_free(pointer) }
}

/// Strict JSON (RFC 8259) straight into CNotify_plist values.
struct PlistJSONReader {
    private let bytes: [UInt8]
    private var at = 0
    private var depth = 0

    init(_ text: String) { bytes = Array(text.utf8) }

    /// The document, which must be an object (a userInfo is a dictionary).
    static func userInfo(_ text: String) throws(PlistJSONError) -> OwnedPlist {
        var reader = PlistJSONReader(text)
        reader.skipSpace()
        guard reader.peek == UInt8(ascii: "{") else { throw PlistJSONError(description: "a userInfo is a JSON object ({...})") }
        let value = try reader.value()
        reader.skipSpace()
        guard reader.at == reader.bytes.count else {
            CNotify_plist_free(value)
            throw reader.fail("text after the JSON document")
        }
        return OwnedPlist(value)
    }

    private var peek: UInt8? { at < bytes.count ? bytes[at] : nil }

    private func fail(_ why: String) -> PlistJSONError { PlistJSONError(description: "not valid JSON at byte \(at): \(why)") }

    private mutating func skipSpace() {
        while let c = peek, c == 0x20 || c == 0x09 || c == 0x0a || c == 0x0d { at += 1 }
    }

    private func made(_ p: OpaquePointer?) throws(PlistJSONError) -> OpaquePointer {
        guard let p else { throw PlistJSONError(description: String(cString: CNotify_last_error())) }
        return p
    }

    private mutating func value() throws(PlistJSONError) -> OpaquePointer {
        skipSpace()
        guard let c = peek else { throw fail("the document ends where a value should be") }
        switch c {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return try made(CNotify_plist_string(try string()))
        case UInt8(ascii: "t"): try literal("true"); return try made(CNotify_plist_bool(1))
        case UInt8(ascii: "f"): try literal("false"); return try made(CNotify_plist_bool(0))
        case UInt8(ascii: "n"): throw fail("null has no property-list form")
        default: return try number()
        }
    }

    private mutating func literal(_ word: String) throws(PlistJSONError) {
        let w = Array(word.utf8)
        guard at + w.count <= bytes.count, Array(bytes[at..<at + w.count]) == w else { throw fail("expected \(word)") }
        at += w.count
    }

    private mutating func enter() throws(PlistJSONError) {
        depth += 1
        if depth > Int(CNOTIFY_PLIST_MAX_DEPTH) { throw fail("containers nested deeper than \(CNOTIFY_PLIST_MAX_DEPTH)") }
    }

    private mutating func object() throws(PlistJSONError) -> OpaquePointer {
        try enter()
        defer { depth -= 1 }
        at += 1
        var keys: [String] = [], values: [OpaquePointer] = []
        defer { values.forEach { CNotify_plist_free($0) } }
        skipSpace()
        if peek == UInt8(ascii: "}") { at += 1 } else {
            while true {
                skipSpace()
                guard peek == UInt8(ascii: "\"") else { throw fail("an object key must be a string") }
                let key = try string()
                if keys.contains(key) { throw fail("the key \"\(key)\" twice") }
                skipSpace()
                guard peek == UInt8(ascii: ":") else { throw fail("expected ':' after a key") }
                at += 1
                keys.append(key)
                values.append(try value())
                skipSpace()
                if peek == UInt8(ascii: ",") { at += 1; continue }
                if peek == UInt8(ascii: "}") { at += 1; break }
                throw fail("expected ',' or '}'")
            }
        }
        // {"$data": "..."} and {"$date": n}: the two values JSON cannot say.
        if keys.count == 1, keys[0] == "$data" || keys[0] == "$date" { return try tagged(keys[0], values[0]) }
        let dict = try made(CNotify_plist_dictionary())
        while !values.isEmpty {
            let key = keys.removeFirst(), value = values.removeFirst()
            guard CNotify_plist_set(dict, key, value) == UInt32(NOTIFY_STATUS_OK) else {
                let why = String(cString: CNotify_last_error())
                CNotify_plist_free(value) // not taken; the rest are freed by the defer above
                CNotify_plist_free(dict)
                throw PlistJSONError(description: "userInfo key \"\(key)\": \(why)")
            }
        }
        return dict
    }

    private func tagged(_ tag: String, _ value: OpaquePointer) throws(PlistJSONError) -> OpaquePointer {
        if tag == "$data" {
            var s: UnsafePointer<CChar>?
            guard CNotify_plist_get_string(value, &s) == UInt32(NOTIFY_STATUS_OK), let s,
                  let data = Base64.decode(String(cString: s)) else { throw fail("$data takes a base64 string (RFC 4648, padded)") }
            return try made(data.withUnsafeBytes { CNotify_plist_data($0.baseAddress, $0.count) })
        }
        var seconds = 0.0, whole: Int64 = 0
        if CNotify_plist_get_real(value, &seconds) == UInt32(NOTIFY_STATUS_OK) { return try made(CNotify_plist_date(seconds)) }
        if CNotify_plist_get_integer(value, &whole) == UInt32(NOTIFY_STATUS_OK) { return try made(CNotify_plist_date(Double(whole))) }
        throw fail("$date takes a number (seconds since 1970)")
    }

    private mutating func array() throws(PlistJSONError) -> OpaquePointer {
        try enter()
        defer { depth -= 1 }
        at += 1
        let list = try made(CNotify_plist_array())
        skipSpace()
        if peek == UInt8(ascii: "]") { at += 1; return list }
        while true {
            let item: OpaquePointer
            do throws(PlistJSONError) { item = try value() } catch { CNotify_plist_free(list); throw error }
            guard CNotify_plist_append(list, item) == UInt32(NOTIFY_STATUS_OK) else {
                let why = String(cString: CNotify_last_error())
                CNotify_plist_free(item)
                CNotify_plist_free(list)
                throw PlistJSONError(description: why)
            }
            skipSpace()
            if peek == UInt8(ascii: ",") { at += 1; continue }
            if peek == UInt8(ascii: "]") { at += 1; return list }
            CNotify_plist_free(list)
            throw fail("expected ',' or ']'")
        }
    }

    private mutating func string() throws(PlistJSONError) -> String {
        at += 1 // the opening quote
        var out: [UInt8] = []
        while let c = peek {
            at += 1
            switch c {
            case UInt8(ascii: "\""):
                guard let text = String(validating: out, as: UTF8.self) else { throw fail("a string that is not UTF-8") }
                return text
            case UInt8(ascii: "\\"):
                guard let e = peek else { break }
                at += 1
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0c)
                case UInt8(ascii: "n"): out.append(0x0a)
                case UInt8(ascii: "r"): out.append(0x0d)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800..<0xDC00).contains(scalar) { // a surrogate pair
                        guard peek == UInt8(ascii: "\\"), at + 1 < bytes.count, bytes[at + 1] == UInt8(ascii: "u") else { throw fail("a lone surrogate") }
                        at += 2
                        let low = try hex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw fail("a lone surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let u = Unicode.Scalar(scalar), u.value != 0 else { throw fail("\\u0000 or a lone surrogate") }
                    out.append(contentsOf: Array(String(Character(u)).utf8))
                default: throw fail("an unknown escape")
                }
            default:
                if c < 0x20 { throw fail("a control character inside a string") }
                out.append(c)
            }
        }
        throw fail("a string that never ends")
    }

    private mutating func hex4() throws(PlistJSONError) -> UInt32 {
        guard at + 4 <= bytes.count, let v = UInt32(String(decoding: bytes[at..<at + 4], as: UTF8.self), radix: 16) else {
            throw fail("\\u needs four hex digits")
        }
        at += 4
        return v
    }

    private mutating func number() throws(PlistJSONError) -> OpaquePointer {
        let start = at
        if peek == UInt8(ascii: "-") { at += 1 }
        guard let first = peek, (0x30...0x39).contains(first) else { throw fail("not a JSON value") }
        if first == 0x30 { at += 1 } else { while let c = peek, (0x30...0x39).contains(c) { at += 1 } }
        var real = false
        if peek == UInt8(ascii: ".") {
            real = true
            at += 1
            guard let c = peek, (0x30...0x39).contains(c) else { throw fail("a digit must follow '.'") }
            while let c = peek, (0x30...0x39).contains(c) { at += 1 }
        }
        if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
            real = true
            at += 1
            if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { at += 1 }
            guard let c = peek, (0x30...0x39).contains(c) else { throw fail("a digit must follow the exponent") }
            while let c = peek, (0x30...0x39).contains(c) { at += 1 }
        }
        let text = String(decoding: bytes[start..<at], as: UTF8.self)
        if !real {
            guard let v = Int64(text) else { throw fail("\(text) is past a 64-bit integer") }
            return try made(CNotify_plist_integer(v))
        }
        guard let v = Double(text), v.isFinite else { throw fail("\(text) is past a double") }
        return try made(CNotify_plist_real(v))
    }
}

/// A received property list as one line of JSON (keys in the order they came).
enum PlistJSONWriter {
    static func json(_ plist: OpaquePointer?) -> String { plist.map { json(PropertyListValue($0)) } ?? "null" }

    private static func json(_ v: PropertyListValue) -> String {
        switch v {
        case .string(let s): return JSONString.quoted(s)
        case .integer(let i): return String(i)
        case .real(let d): return real(d)
        case .bool(let b): return b ? "true" : "false"
        case .data(let bytes): return "{\"$data\":\(JSONString.quoted(Base64.encode(bytes)))}"
        case .date(let seconds): return "{\"$date\":\(real(seconds))}"
        case .array(let items): return "[" + items.map(json).joined(separator: ",") + "]"
        case .dictionary(let entries):
            return "{" + entries.map { JSONString.quoted($0.key) + ":" + json($0.value) }.joined(separator: ",") + "}"
        }
    }

    /// A real that reads back as a real: always with a fraction or an exponent.
    private static func real(_ v: Double) -> String {
        let text = "\(v)"
        return text.contains(".") || text.contains("e") || text.contains("E") ? text : text + ".0"
    }
}

/// Base64 (RFC 4648, the standard alphabet, padded), both ways: no Foundation in this tool, which
/// keeps it small.
enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i < bytes.count {
            let b0 = bytes[i], b1 = i + 1 < bytes.count ? bytes[i + 1] : 0, b2 = i + 2 < bytes.count ? bytes[i + 2] : 0
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 0x03) << 4 | b1 >> 4)])
            out.append(i + 1 < bytes.count ? alphabet[Int((b1 & 0x0f) << 2 | b2 >> 6)] : UInt8(ascii: "="))
            out.append(i + 2 < bytes.count ? alphabet[Int(b2 & 0x3f)] : UInt8(ascii: "="))
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// nil for anything but whole, padded groups of the alphabet.
    static func decode(_ text: String) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 4 * 3)
        var group = 0
        while group < chars.count {
            var values: [UInt8] = []
            var padding = 0
            for k in 0..<4 {
                let c = chars[group + k]
                if c == UInt8(ascii: "=") {
                    guard group + 4 == chars.count, k >= 2 else { return nil } // padding only at the very end
                    padding += 1
                    values.append(0)
                    continue
                }
                guard padding == 0, let v = alphabet.firstIndex(of: c) else { return nil }
                values.append(UInt8(v))
            }
            out.append(values[0] << 2 | values[1] >> 4)
            if padding < 2 { out.append(values[1] << 4 | values[2] >> 2) }
            if padding < 1 { out.append(values[2] << 6 | values[3]) }
            group += 4
        }
        return out
    }
}

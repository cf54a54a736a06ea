import FoundationEssentials
import Glibc

/// The on-disk form of a message (docs/PROTOCOL.md, "Message files"): one header line, then the
/// payload. The header carries the payload's length and checksum, so a truncated or altered file
/// is recognised instead of being handed to a decoder:
///
///     DNWH1 <id> <json|data> <length> <checksum, 16 hex> <passed, seconds> <pid>\n<payload>
///
/// A plain space-separated line rather than JSON: it is parsed on every delivery, and
/// Foundation's JSON coders cost more than the rest of a read.
struct Envelope: Sendable {
    static let magic = "DNWH1"
    /// A header is under a hundred bytes; anything longer is not ours.
    static let maxHeaderBytes = 512

    struct Header: Sendable, Equatable {
        /// Unique per pass: listeners use it so a message is never delivered twice.
        var id: String
        var kind: WormholeMessage.Kind
        var length: Int
        var checksum: String
        /// Seconds since 1970.
        var passed: Double
        var pid: Int32
    }

    var header: Header
    var payload: Data

    init(kind: WormholeMessage.Kind, payload: Data) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        header = Header(id: Envelope.randomID(), kind: kind, length: payload.count,
                        checksum: Checksum.hex(of: payload),
                        passed: Double(Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec / 1000)) / 1_000_000,
                        pid: getpid())
        self.payload = payload
    }

    /// A random (version 4) UUID in its canonical upper-case form, as `UUID().uuidString` spells
    /// it: 16 bytes of one `getentropy(3)`, a `getrandom(2)` (FoundationEssentials' `UUID()`
    /// opens, reads and closes /dev/urandom each time).
    static func randomID() -> String {
        var b = (UInt64(0), UInt64(0))
        if withUnsafeMutableBytes(of: &b, { getentropy($0.baseAddress, 16) }) != 0 {
            var generator = SystemRandomNumberGenerator() // the standard library's own source
            b = (generator.next(), generator.next())
        }
        return withUnsafeMutableBytes(of: &b) { raw -> String in
            raw[6] = (raw[6] & 0x0F) | 0x40 // version 4
            raw[8] = (raw[8] & 0x3F) | 0x80 // variant 10
            return String(unsafeUninitializedCapacity: 36) { out in
                let digits: StaticString = "0123456789ABCDEF"
                var o = 0
                for i in 0..<16 {
                    if i == 4 || i == 6 || i == 8 || i == 10 { out[o] = 0x2D; o += 1 }
                    out[o] = digits.utf8Start[Int(raw[i] >> 4)]
                    out[o + 1] = digits.utf8Start[Int(raw[i] & 0x0F)]
                    o += 2
                }
                return o
            }
        }
    }

    /// The file's bytes: the header line, then the payload.
    func encoded() -> Data {
        let h = header
        // Microseconds: the time as PROTOCOL.md writes it, seconds with six decimals, which a
        // reader makes the same time of.
        let micros = Envelope.micros(of: h.passed)
        var line = [UInt8]()
        line.reserveCapacity(128)
        line.append(contentsOf: Envelope.magic.utf8)
        line.append(0x20)
        line.append(contentsOf: h.id.utf8)
        line.append(0x20)
        line.append(contentsOf: h.kind.rawValue.utf8)
        line.append(0x20)
        Envelope.appendDecimal(UInt64(max(0, h.length)), to: &line)
        line.append(0x20)
        line.append(contentsOf: h.checksum.utf8)
        line.append(0x20)
        Envelope.appendTime(micros, to: &line)
        line.append(0x20)
        if h.pid < 0 { line.append(0x2D) }
        Envelope.appendDecimal(UInt64(h.pid.magnitude), to: &line)
        line.append(0x0A)
        var data = Data(capacity: line.count + payload.count)
        data.append(contentsOf: line)
        data.append(payload)
        return data
    }

    /// `micros` microseconds as PROTOCOL.md writes a time: seconds, a point, six digits.
    private static func appendTime(_ micros: UInt64, to bytes: inout [UInt8]) {
        appendDecimal(micros / 1_000_000, to: &bytes)
        bytes.append(0x2E)
        let fraction = micros % 1_000_000
        var scale: UInt64 = 100_000
        while scale > 0 { bytes.append(0x30 + UInt8(fraction / scale % 10)); scale /= 10 }
    }

    /// The microseconds to write for `passed`: a count a reader makes `passed` of again (`time`).
    /// Scaling by 10⁶ may miss it by one from 2112 on (2⁵² µs), and from 2255 (2⁵³ µs) a Double
    /// holds every other microsecond only, so the neighbours are tried too. Only a caller of
    /// this type could hand in a time outside 0 ..< 10¹⁰ s: it is written as 0 rather than trapping.
    private static func micros(of passed: Double) -> UInt64 {
        let scaled = (passed * 1_000_000).rounded()
        guard scaled >= 0, scaled < 1e16 else { return 0 }
        let guess = UInt64(scaled)
        for candidate in [guess, guess &- 1, guess + 1, guess &- 2, guess + 2]
            where candidate < 10_000_000_000_000_000 && seconds(ofMicros: candidate) == passed {
            return candidate
        }
        return guess
    }

    /// The time a reader makes of `micros` microseconds written as PROTOCOL.md writes a time:
    /// under 2⁵³ (until 2255), exact in a Double, one correctly rounded division gives the
    /// decimal's nearest Double; later ones are left to `strtod`, as Double(String) reads them.
    private static func seconds(ofMicros micros: UInt64) -> Double {
        guard micros >= 1 << 53 else { return Double(micros) / 1_000_000 }
        var text: [UInt8] = []
        appendTime(micros, to: &text)
        return Double(String(decoding: text, as: UTF8.self)) ?? 0
    }

    private static func appendDecimal(_ value: UInt64, to bytes: inout [UInt8]) {
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                      UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var n = 0, v = value
        withUnsafeMutableBytes(of: &digits) { d in
            repeat { d[n] = 0x30 + UInt8(v % 10); v /= 10; n += 1 } while v > 0
            while n > 0 { n -= 1; bytes.append(d[n]) }
        }
    }

    /// Parses a file's bytes; the error says what is wrong with it. The header must have
    /// PROTOCOL.md's form exactly ("Message file"): numbers in decimal digits, the checksum in
    /// 16 lower-case hex digits, the time as seconds (at most 10 digits) and six decimals.
    static func decode(_ data: Data) -> Result<Envelope, EnvelopeFault> {
        data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Result<Envelope, EnvelopeFault> in
            switch parseHeader(raw) {
            case .failure(let fault): return .failure(fault)
            case .success(let (header, payloadStart)):
                let payload = UnsafeRawBufferPointer(rebasing: raw[payloadStart...])
                guard payload.count == header.header.length else {
                    return .failure(.init("payload is \(payload.count) bytes, header says \(header.header.length) (truncated?)"))
                }
                guard Checksum.value(of: payload) == header.checksumValue else {
                    return .failure(.init("payload checksum mismatch"))
                }
                return .success(Envelope(header: header.header, payload: Data(payload)))
            }
        }
    }

    private struct Parsed {
        var header: Header
        var checksumValue: UInt64
    }

    /// The header line of `raw` and where its payload starts.
    private static func parseHeader(_ raw: UnsafeRawBufferPointer) -> Result<(Parsed, Int), EnvelopeFault> {
        let magic = Envelope.magic.utf8
        let limit = min(raw.count, maxHeaderBytes)
        guard let newline = raw[..<limit].firstIndex(of: 0x0A) else {
            return .failure(.init(raw.starts(with: magic) ? "header line missing or too long"
                                                          : "not a wormhole message (no \(Envelope.magic) header)"))
        }
        // The seven fields, split at single spaces.
        var fields: [Range<Int>] = []
        fields.reserveCapacity(7)
        var start = 0
        for i in 0..<newline where raw[i] == 0x20 {
            fields.append(start ..< i)
            start = i + 1
            if fields.count > 7 { break }
        }
        fields.append(start ..< newline)
        guard raw[fields[0]].elementsEqual(magic) else {
            return .failure(.init("not a wormhole message (no \(Envelope.magic) header)"))
        }
        let invalid = EnvelopeFault("header is not valid")
        guard fields.count == 7 else { return .failure(invalid) }
        // The id is opaque text: any UTF-8 without a space (ASCII, as a UUID, read directly).
        let idBytes = UnsafeRawBufferPointer(rebasing: raw[fields[1]])
        guard let id = idBytes.allSatisfy({ $0 < 0x80 }) ? String(decoding: idBytes, as: UTF8.self)
                                                         : String(validating: idBytes, as: UTF8.self)
        else { return .failure(invalid) }
        let kind: WormholeMessage.Kind
        switch raw[fields[2]] {
        case let k where k.elementsEqual("json".utf8): kind = .json
        case let k where k.elementsEqual("data".utf8): kind = .data
        default: return .failure(invalid)
        }
        guard let length = decimal(raw[fields[3]], maxDigits: 18),
              fields[4].count == 16, let checksum = hex(raw[fields[4]]),
              let passed = time(raw[fields[5]]),
              let pid = decimal(raw[fields[6]], maxDigits: 10), pid <= Int32.max
        else { return .failure(invalid) }
        let header = Header(id: id, kind: kind, length: Int(length),
                            checksum: String(decoding: raw[fields[4]], as: UTF8.self),
                            passed: passed, pid: Int32(pid))
        return .success((Parsed(header: header, checksumValue: checksum), newline + 1))
    }

    /// 1 to `maxDigits` decimal digits, nothing else.
    private static func decimal(_ bytes: Slice<UnsafeRawBufferPointer>, maxDigits: Int) -> UInt64? {
        guard !bytes.isEmpty, bytes.count <= maxDigits else { return nil }
        var value: UInt64 = 0
        for b in bytes {
            guard b >= 0x30, b <= 0x39 else { return nil }
            value = value * 10 + UInt64(b - 0x30)
        }
        return value
    }

    /// Lower-case hex digits, nothing else.
    private static func hex(_ bytes: Slice<UnsafeRawBufferPointer>) -> UInt64? {
        var value: UInt64 = 0
        for b in bytes {
            switch b {
            case 0x30...0x39: value = value << 4 | UInt64(b - 0x30)
            case 0x61...0x66: value = value << 4 | UInt64(b - 0x61 + 10)
            default: return nil
            }
        }
        return value
    }

    /// `seconds.micros`: 1 to 10 digits, a dot, exactly six digits; the value `strtod` reads
    /// (leading zeros of the seconds change nothing).
    private static func time(_ bytes: Slice<UnsafeRawBufferPointer>) -> Double? {
        guard let dot = bytes.firstIndex(of: 0x2E), bytes.endIndex - dot == 7,
              let seconds = decimal(bytes[bytes.startIndex ..< dot], maxDigits: 10),
              let micros = decimal(bytes[(dot + 1)...], maxDigits: 6) else { return nil }
        return Envelope.seconds(ofMicros: seconds * 1_000_000 + micros)
    }

    private init(header: Header, payload: Data) {
        self.header = header
        self.payload = payload
    }
}

struct EnvelopeFault: Error {
    let reason: String
    init(_ reason: String) { self.reason = reason }
}

/// A fast 64-bit checksum of a payload (8 bytes per step, multiply–xor–rotate), to tell a
/// damaged payload from a good one. Not cryptographic: the container's permissions keep
/// strangers out; this catches truncation and stray writes.
enum Checksum {
    static func hex(of data: Data) -> String {
        let sum = data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in value(of: raw) }
        return String(unsafeUninitializedCapacity: 16) { out in
            let digits: StaticString = "0123456789abcdef"
            for i in 0..<16 { out[i] = digits.utf8Start[Int(truncatingIfNeeded: sum >> UInt64(60 - 4 * i) & 0xF)] }
            return 16
        }
    }

    static func value(of raw: UnsafeRawBufferPointer) -> UInt64 {
        var h: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(raw.count)
        var offset = 0
        while offset + 8 <= raw.count {
            let word = raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            h = ((h ^ word) &* 0xFF51_AFD7_ED55_8CCD)
            h = (h << 31) | (h >> 33)
            offset += 8
        }
        while offset < raw.count {
            h = (h ^ UInt64(raw[offset])) &* 0x0100_0000_01B3
            offset += 1
        }
        h ^= h >> 33
        h = h &* 0xC4CE_B9FE_1A85_EC53
        return h ^ (h >> 33)
    }
}

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
        header = Header(id: Envelope.randomID(), kind: kind, length: payload.count,
                        checksum: Checksum.hex(of: payload), passed: Date().timeIntervalSince1970,
                        pid: getpid())
        self.payload = payload
    }

    /// A random (version 4) UUID, as `UUID().uuidString` spells it, from `getrandom(2)`:
    /// FoundationEssentials' `UUID()` opens, reads and closes /dev/urandom each time, three system
    /// calls on every pass.
    static func randomID() -> String {
        var generator = SystemRandomNumberGenerator()
        var high: UInt64 = generator.next(), low: UInt64 = generator.next()
        high = (high & ~0xF000) | 0x4000                       // version 4 (bits 12-15 of time_hi)
        low = (low & ~(0xC000 << 48)) | (0x8000 << 48)         // variant 10 (the top bits of clock_seq)
        let b = withUnsafeBytes(of: (high.bigEndian, low.bigEndian)) { Array($0) }
        return UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
                           b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])).uuidString
    }

    func encoded() -> Data {
        let h = header
        // Seconds with six decimals, without String(format:), which costs a microsecond.
        let micros = Int64((h.passed * 1_000_000).rounded())
        let fraction = String(micros % 1_000_000)
        let passed = "\(micros / 1_000_000)." + String(repeating: "0", count: 6 - fraction.count) + fraction
        let line = "\(Envelope.magic) \(h.id) \(h.kind.rawValue) \(h.length) \(h.checksum) \(passed) \(h.pid)\n"
        var data = Data(capacity: line.utf8.count + payload.count)
        data.append(contentsOf: line.utf8)
        data.append(payload)
        return data
    }

    /// Parses a file's bytes; the error says what is wrong with it.
    static func decode(_ data: Data) -> Result<Envelope, EnvelopeFault> {
        guard let newline = data.prefix(maxHeaderBytes).firstIndex(of: 0x0a),
              let line = String(data: data[data.startIndex ..< newline], encoding: .utf8)
        else {
            return .failure(.init(data.starts(with: Array(magic.utf8)) ? "header line missing or too long"
                                                                        : "not a wormhole message (no \(magic) header)"))
        }
        let fields = line.split(separator: " ", omittingEmptySubsequences: false)
        guard fields.first == Substring(magic) else {
            return .failure(.init("not a wormhole message (no \(magic) header)"))
        }
        guard fields.count == 7, let kind = WormholeMessage.Kind(rawValue: String(fields[2])),
              let length = Int(fields[3]), length >= 0, fields[4].utf8.count == 16,
              let passed = Double(fields[5]), let pid = Int32(fields[6])
        else {
            return .failure(.init("header is not valid"))
        }
        let payload = data[(newline + 1)...]
        guard payload.count == length else {
            return .failure(.init("payload is \(payload.count) bytes, header says \(length) (truncated?)"))
        }
        let header = Header(id: String(fields[1]), kind: kind, length: length, checksum: String(fields[4]),
                            passed: passed, pid: pid)
        let body = Data(payload)
        guard Checksum.hex(of: body) == header.checksum else {
            return .failure(.init("payload checksum mismatch"))
        }
        return .success(Envelope(header: header, payload: body))
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
        let hex = String(data.withUnsafeBytes { value(of: $0) }, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
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

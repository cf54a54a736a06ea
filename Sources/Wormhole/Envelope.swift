import Foundation

/// The on-disk form of a message (docs/PROTOCOL.md, "Wormhole files"): a magic line, a one-line
/// JSON header, then the payload. The header carries the payload's length and checksum, so a
/// truncated or altered file is recognised instead of being handed to a decoder.
struct Envelope: Sendable {
    static let magic = Data("DNWH1\n".utf8)
    /// A header is a few hundred bytes; anything longer is not ours.
    static let maxHeaderBytes = 4096

    struct Header: Codable, Sendable {
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
        header = Header(id: UUID().uuidString, kind: kind, length: payload.count,
                        checksum: Checksum.hex(of: payload), passed: Date().timeIntervalSince1970,
                        pid: getpid())
        self.payload = payload
    }

    func encoded() -> Data {
        var data = Envelope.magic
        data.append(try! JSONEncoder().encode(header))  // a struct of strings and numbers always encodes
        data.append(0x0a)
        data.append(payload)
        return data
    }

    /// Parses a file's bytes; the error says what is wrong with it.
    static func decode(_ data: Data) -> Result<Envelope, EnvelopeFault> {
        guard data.count >= magic.count, data.prefix(magic.count) == magic else {
            return .failure(.init("not a wormhole message (no DNWH1 magic)"))
        }
        let rest = data.dropFirst(magic.count)
        guard let newline = rest.prefix(maxHeaderBytes).firstIndex(of: 0x0a) else {
            return .failure(.init("header line missing or over \(maxHeaderBytes) bytes"))
        }
        guard let header = try? JSONDecoder().decode(Header.self, from: rest[rest.startIndex ..< newline]) else {
            return .failure(.init("header is not valid"))
        }
        let payload = Data(rest[(newline + 1)...])
        guard payload.count == header.length else {
            return .failure(.init("payload is \(payload.count) bytes, header says \(header.length) (truncated?)"))
        }
        guard Checksum.hex(of: payload) == header.checksum else {
            return .failure(.init("payload checksum mismatch"))
        }
        return .success(Envelope(header: header, payload: payload))
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
        let value = data.withUnsafeBytes { raw -> UInt64 in
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
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}

import Foundation

/// The Wormhole file format computed from docs/PROTOCOL.md ("Wormhole files"), independently of
/// the Wormhole module: tests write files exactly as another implementation would.
enum WormholeTestSupport {
    /// The payload checksum, 16 lowercase hex digits.
    static func checksum(_ payload: Data) -> String {
        let bytes = [UInt8](payload)
        var h: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(bytes.count)
        var i = 0
        while i + 8 <= bytes.count {
            var w: UInt64 = 0
            for k in 0 ..< 8 { w |= UInt64(bytes[i + k]) << (8 * UInt64(k)) }
            h = (h ^ w) &* 0xFF51_AFD7_ED55_8CCD
            h = (h << 31) | (h >> 33)
            i += 8
        }
        while i < bytes.count {
            h = (h ^ UInt64(bytes[i])) &* 0x1_0000_0001_B3
            i += 1
        }
        h ^= h >> 33
        h = h &* 0xC4CE_B9FE_1A85_EC53
        h ^= h >> 33
        let hex = String(h, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// A message file: `header` supplies id, passed and pid (as a previous file had them).
    static func envelope(kind: String, payload: Data, like header: Data) throws -> Data {
        let fields = String(decoding: header, as: UTF8.self).split(separator: " ")
        guard fields.count == 7 else { throw TestFailure("not a header: \(String(decoding: header, as: UTF8.self))") }
        let line = "DNWH1 \(fields[1]) \(kind) \(payload.count) \(checksum(payload)) \(fields[5]) \(fields[6])\n"
        return Data(line.utf8) + payload
    }
}

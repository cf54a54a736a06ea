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

    /// The checksum as a number (the hex digits above, read back).
    static func checksumValue(_ bytes: Data) -> UInt64 { UInt64(checksum(bytes), radix: 16)! }

    /// A queue segment's name: the first of its 256 sequences, 20 digits, and `.seg`.
    static func segmentName(first: UInt64) -> String {
        let digits = String(first)
        return String(repeating: "0", count: 20 - digits.count) + digits + ".seg"
    }

    static func littleEndian<T: FixedWidthInteger>(_ value: T) -> Data {
        withUnsafeBytes(of: value.littleEndian) { Data($0) }
    }

    /// An index entry of a segment (32 bytes): offset, length, 0, time, and the check over the
    /// first 24 bytes followed by the sequence.
    static func segmentEntry(offset: UInt64, length: UInt32, nanoseconds: Int64, sequence: UInt64) -> Data {
        let head = littleEndian(offset) + littleEndian(length) + littleEndian(UInt32(0)) + littleEndian(nanoseconds)
        return head + littleEndian(checksumValue(head + littleEndian(sequence)))
    }

    /// Every message a queue's segments hold, by sequence (entries whose check holds), read as
    /// docs/PROTOCOL.md says; and the sequences whose entry is damaged.
    static func segmentMessages(_ queue: String) throws -> (messages: [UInt64: Data], damaged: [UInt64]) {
        var messages: [UInt64: Data] = [:], damaged: [UInt64] = []
        for name in try FileManager.default.contentsOfDirectory(atPath: queue) where name.hasSuffix(".seg") {
            guard let first = UInt64(name.dropLast(4)) else { continue }
            let bytes = try Data(contentsOf: URL(fileURLWithPath: queue + "/" + name))
            for i in 0 ..< 256 where bytes.count >= 32 * (i + 1) {
                let entry = bytes.subdata(in: 32 * i ..< 32 * (i + 1))
                if entry.allSatisfy({ $0 == 0 }) { continue }
                let word = { (at: Int) in entry.subdata(in: at ..< at + 8).withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) } }
                let offset = Int(truncatingIfNeeded: word(0)), length = Int(word(8) & 0xFFFF_FFFF)
                let sequence = first + UInt64(i)
                guard word(24) == checksumValue(entry.prefix(24) + littleEndian(sequence)), word(0) <= UInt64(bytes.count), offset + length <= bytes.count else {
                    damaged.append(sequence)
                    continue
                }
                messages[sequence] = bytes.subdata(in: offset ..< offset + length)
            }
        }
        return (messages, damaged.sorted())
    }
}

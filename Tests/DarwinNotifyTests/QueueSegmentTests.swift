import Foundation
import Testing
@testable import Wormhole

/// Queue segments (QueueSegment.swift) under damaged and hostile bytes, in process: a real queue
/// is written, its segment changed at random (bytes flipped, entries forged with good checks and
/// any offset or length, the file cut short), and every message is read and one more appended.
/// Whatever the bytes, a read gives a message, nothing, or a typed error, and never traps; an
/// append succeeds or throws. The random changes come from a fixed seed, so a failure repeats.
@Suite("Wormhole queue segments under damaged bytes")
struct QueueSegmentTests {
    /// SplitMix64: a small generator with a seed, for changes that repeat run after run.
    struct Seeded: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static func queue(in directory: String) -> MessageQueue {
        var configuration = WormholeConfiguration(syncToDisk: false)
        configuration.maxPayloadBytes = 4096
        return MessageQueue(layout: Layout(base: .init(directory), shared: false), identifier: "q", configuration: configuration)
    }

    @Test("an entry decodes only with its own sequence and a check that holds; any 32 bytes decode without trapping")
    func entries() {
        var random = Seeded(state: 1)
        let entry = QueueSegment.Entry(offset: 8192, length: 97, nanoseconds: 1)
        let bytes = entry.encoded(sequence: 7)
        #expect(QueueSegment.Slot.decode(bytes, sequence: 7) == .entry(entry))
        #expect(QueueSegment.Slot.decode(bytes, sequence: 8) == .damaged)
        #expect(QueueSegment.Slot.decode([UInt8](repeating: 0, count: 32), sequence: 7) == .empty)
        for i in 0 ..< 32 {
            var changed = bytes
            changed[i] ^= 0x10
            #expect(QueueSegment.Slot.decode(changed, sequence: 7) == .damaged, "byte \(i) changed")
        }
        for _ in 0 ..< 20_000 {
            let any = (0 ..< 32).map { _ in UInt8.random(in: 0 ... 255, using: &random) }
            _ = QueueSegment.Slot.decode(any, sequence: UInt64.random(in: 1 ... .max, using: &random))
        }
        // Good checks over offsets no file has, and over the largest that off_t holds.
        for offset: UInt64 in [8191, QueueSegment.maxOffset + 1, .max, UInt64(Int64.max)] {
            let forged = QueueSegment.Entry(offset: offset, length: .max, nanoseconds: .min).encoded(sequence: 3)
            #expect(QueueSegment.Slot.decode(forged, sequence: 3) == .damaged, "offset \(offset)")
        }
    }

    @Test("a segment changed at random 300 times: every read gives a message, nothing or a typed error; every append succeeds or throws")
    func damagedSegments() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("segments-\(getpid())-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let pristine = root + "/pristine"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let original = Self.queue(in: pristine)
        try original.layout.makeDirectories()
        for n in 1 ... 20 {
            try original.append(Envelope(kind: .data, payload: Data(repeating: UInt8(n), count: n * 37)))
        }
        let name = QueueSegment.name(first: 1)
        let segment = try Data(contentsOf: URL(fileURLWithPath: original.directory.appending(name).string))
        let state = try Data(contentsOf: URL(fileURLWithPath: original.statePath.string))
        var random = Seeded(state: 36)
        var outcomes: [String: Int] = [:]
        for round in 0 ..< 300 {
            var bytes = segment
            switch round % 4 {
            case 0: // bytes flipped anywhere
                for _ in 0 ..< Int.random(in: 1 ... 8, using: &random) {
                    bytes[Int.random(in: 0 ..< bytes.count, using: &random)] ^= UInt8.random(in: 1 ... 255, using: &random)
                }
            case 1: // an entry forged with a good check, any offset and length
                let sequence = UInt64.random(in: 1 ... 22, using: &random)
                let forged = QueueSegment.Entry(offset: UInt64.random(in: 0 ... .max, using: &random) >> UInt64.random(in: 0 ... 63, using: &random),
                                                length: UInt32.random(in: 1 ... .max, using: &random) >> UInt32.random(in: 0 ... 31, using: &random),
                                                nanoseconds: Int64.random(in: .min ... .max, using: &random))
                let at = Int(sequence - 1) * QueueSegment.entrySize
                bytes.replaceSubrange(at ..< at + QueueSegment.entrySize, with: forged.encoded(sequence: sequence))
            case 2: // cut short
                bytes = bytes.prefix(Int.random(in: 0 ..< bytes.count, using: &random))
            default: // an index entry's words swapped with another's
                let a = Int.random(in: 0 ..< 20, using: &random) * 32, b = Int.random(in: 0 ..< 20, using: &random) * 32
                let saved = bytes.subdata(in: a ..< a + 32)
                bytes.replaceSubrange(a ..< a + 32, with: bytes.subdata(in: b ..< b + 32))
                bytes.replaceSubrange(b ..< b + 32, with: saved)
            }
            let directory = root + "/r\(round)"
            let queue = Self.queue(in: directory)
            try queue.layout.makeDirectories()
            try queue.prepare()
            try bytes.write(to: URL(fileURLWithPath: queue.directory.appending(name).string))
            try state.write(to: URL(fileURLWithPath: queue.statePath.string))
            for sequence: UInt64 in 1 ... 22 {
                switch try queue.read(sequence) {
                case nil: outcomes["none", default: 0] += 1
                case .success?: outcomes["message", default: 0] += 1
                case .failure(let error)?:
                    #expect(error.code == .corruptMessage, "round \(round), message \(sequence): \(error)")
                    outcomes["error", default: 0] += 1
                }
            }
            do {
                let sequence = try queue.append(Envelope(kind: .json, payload: Data("{\"after\":\(round)}".utf8)))
                guard case .success(let message)? = try queue.read(sequence) else {
                    Issue.record("round \(round): the message appended as \(sequence) does not read back")
                    continue
                }
                #expect(message.payload == Data("{\"after\":\(round)}".utf8))
                outcomes["appended", default: 0] += 1
            } catch {
                outcomes["append refused", default: 0] += 1
            }
            try? FileManager.default.removeItem(atPath: directory)
        }
        // The changes reached every kind of outcome (the test did not only ever read good bytes).
        #expect(outcomes["message", default: 0] > 0 && outcomes["error", default: 0] > 0 && outcomes["none", default: 0] > 0, "\(outcomes)")
        #expect(outcomes["appended", default: 0] == 300, "\(outcomes)")
    }
}

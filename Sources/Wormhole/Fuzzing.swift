// Fuzzing.swift: the wormhole's readers of what another process writes, as the fuzzing lane
// drives them (Tests/Fuzz/swift, .ci/fuzz): each takes any bytes without trapping, and what it
// accepts comes out the same once written back and read again.
import FoundationEssentials

package enum WormholeFuzzing {
    /// A message file (docs/PROTOCOL.md "Message file"): refused, or decoded to a message whose
    /// file form decodes to the same header and payload.
    /// True when it was accepted.
    @discardableResult
    package static func messageFile(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard case .success(let envelope) = Envelope.decode(Data(bytes)) else { return false }
        guard case .success(let again) = Envelope.decode(envelope.encoded()) else {
            fatalError("a message file that decodes does not decode once written back")
        }
        precondition(again.header == envelope.header && again.payload == envelope.payload,
                     "a message file written back decodes to another message")
        return true
    }

    /// A queue segment's index entry: the first 8 bytes (little-endian) the sequence it is read
    /// for, the next 32 the entry. Empty, damaged, or an entry whose written form reads the same.
    /// True when it was an entry.
    @discardableResult
    package static func queueEntry(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count >= 8 else { return false }
        var sequence: UInt64 = 0
        withUnsafeMutableBytes(of: &sequence) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[0 ..< 8])) }
        sequence = UInt64(littleEndian: sequence)
        let slot = QueueSegment.Slot.decode(Array(bytes[8...]), sequence: sequence)
        guard case .entry(let entry) = slot else { return false }
        precondition(QueueSegment.Slot.decode(entry.encoded(sequence: sequence), sequence: sequence) == slot,
                     "a queue entry written back reads as another")
        return true
    }
}

// QueueSegment.swift: a queue's messages, 256 sequences to a file: the segment format, its index
// entries, and opening, reading and writing one segment.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import FoundationEssentials
import SystemPackage

/// One file per 256 sequences, `first … first + 255` with `first = 256·k + 1` (docs/PROTOCOL.md,
/// "Queue segments"):
///
///     queues/<identifier>/<20-digit first>.seg
///     [0, 8192)   index: entry i (32 bytes) for sequence first + i
///     [8192, …)   records: each message's bytes (header line and payload), appended at the end
///
/// A queue used to make a file (an inode, a link, a sync) per message. On this project's disk
/// (ext4 without a journal) the inode allocator walks past every inode deleted in the last minute,
/// and each file's sync is its own device flush: a queue moved 1,400-10,000 messages/s, by what had
/// been deleted before (BENCHMARKS.md, "The queue and deleted inodes"). A segment takes one inode
/// per 256 messages and one sync per group commit round.
///
/// Records are never changed once their entry is written; an entry is written after its record
/// and before `.state` counts it, each by one `pwrite` (which a killed process completes or never
/// starts), so a reader that finds an entry finds its record whole.
enum QueueSegment {
    static let capacity: UInt64 = 256
    static let entrySize = 32
    static let indexSize = Int(capacity) * entrySize
    /// The largest record offset an entry may hold (2⁶² - 1): with a 32-bit length its end still
    /// fits `off_t`.
    static let maxOffset: UInt64 = 1 << 62 - 1

    static func first(of sequence: UInt64) -> UInt64 { (sequence - 1) / capacity * capacity + 1 }
    static func last(of sequence: UInt64) -> UInt64 { first(of: sequence) + capacity - 1 }

    static func name(first: UInt64) -> String {
        let digits = String(first)
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits + ".seg"
    }

    /// A record's place (little-endian, 32 bytes): offset UInt64, length UInt32, 0 UInt32,
    /// appended at (ns since the epoch) Int64, check UInt64: the wormhole checksum of the first 24
    /// bytes followed by the sequence (UInt64 LE). All zero: no message.
    struct Entry: Equatable {
        var offset: UInt64
        var length: UInt32
        var nanoseconds: Int64

        var seconds: Double { Double(nanoseconds) / 1e9 }

        func encoded(sequence: UInt64) -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: QueueSegment.entrySize)
            bytes.withUnsafeMutableBytes { raw in
                raw.storeBytes(of: offset.littleEndian, toByteOffset: 0, as: UInt64.self)
                raw.storeBytes(of: length.littleEndian, toByteOffset: 8, as: UInt32.self)
                raw.storeBytes(of: nanoseconds.littleEndian, toByteOffset: 16, as: Int64.self)
                raw.storeBytes(of: Entry.check(raw, sequence).littleEndian, toByteOffset: 24, as: UInt64.self)
            }
            return bytes
        }

        static func check(_ raw: UnsafeMutableRawBufferPointer, _ sequence: UInt64) -> UInt64 {
            var signed = [UInt8](repeating: 0, count: 32)
            signed.withUnsafeMutableBytes { out in
                out.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[0 ..< 24]))
                out.storeBytes(of: sequence.littleEndian, toByteOffset: 24, as: UInt64.self)
            }
            return signed.withUnsafeBytes { Checksum.value(of: $0) }
        }
    }

    enum Slot: Equatable {
        /// Nothing written for this sequence (or its message was removed).
        case empty
        case entry(Entry)
        /// Bytes that are not an entry for this sequence: reported, never delivered.
        case damaged

        static func decode(_ bytes: [UInt8], sequence: UInt64) -> Slot {
            guard bytes.count == QueueSegment.entrySize else { return .empty }
            if bytes.allSatisfy({ $0 == 0 }) { return .empty }
            var copy = bytes
            return copy.withUnsafeMutableBytes { raw -> Slot in
                let entry = Entry(offset: UInt64(littleEndian: raw.load(fromByteOffset: 0, as: UInt64.self)),
                                  length: UInt32(littleEndian: raw.load(fromByteOffset: 8, as: UInt32.self)),
                                  nanoseconds: Int64(littleEndian: raw.load(fromByteOffset: 16, as: Int64.self)))
                let check = UInt64(littleEndian: raw.load(fromByteOffset: 24, as: UInt64.self))
                // An offset is a file offset: a good check over one past what `off_t` holds is
                // someone's doing, and damaged like any other.
                guard raw.load(fromByteOffset: 12, as: UInt32.self) == 0, check == Entry.check(raw, sequence),
                      entry.offset >= UInt64(QueueSegment.indexSize), entry.offset <= QueueSegment.maxOffset,
                      entry.length > 0 else { return .damaged }
                return .entry(entry)
            }
        }
    }

    /// What is at a segment's path, for a reader.
    enum Opened {
        case missing
        case segment(Segment)
        /// Not a regular file (a link, FIFO, directory, device): to quarantine.
        case unusable(String)
    }

    enum Access { case read, write, create }

    /// Opens a segment: never through a link, never blocking on a FIFO.
    static func open(_ path: FilePath, _ access: Access, permissions: FilePermissions) throws(WormholeError) -> Opened {
        let flags = [Access.read: O_RDONLY, .write: O_RDWR, .create: O_RDWR | O_CREAT][access]! | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC
        let fd = PosixFiles.openQuietly(path.string, flags, permissions.rawValue)
        guard fd >= 0 else {
            switch errno {
            case ENOENT: return .missing
            case ELOOP: return .unusable("a symbolic link")
            case ENXIO: return .unusable("a socket or device")
            case EISDIR: return .unusable("a directory")
            case let error: throw .io("open \(path)", Errno(rawValue: error))
            }
        }
        guard let info = FileStatus(fd) else {
            let error = errno
            close(fd)
            throw .io("statx \(path)", Errno(rawValue: error))
        }
        switch info.type {
        case S_IFREG: return .segment(Segment(fd: fd, path: path, size: info.size, identity: "\(info.device):\(info.inode)"))
        case S_IFDIR: close(fd); return .unusable("a directory")
        case S_IFIFO: close(fd); return .unusable("a FIFO")
        default: close(fd); return .unusable("not a regular file")
        }
    }
}

/// An open segment file. Writers use it under the queue's exclusive lock; readers without a lock.
final class Segment {
    let fd: Int32
    let path: FilePath
    /// Device and inode: the file itself, whatever its name is by now.
    let identity: String
    /// The file's size when opened, then as this writer grew it.
    private(set) var size: Int
    private var handedOver = false

    init(fd: Int32, path: FilePath, size: Int, identity: String) {
        (self.fd, self.path, self.size, self.identity) = (fd, path, size, identity)
    }

    deinit { if !handedOver { close(fd) } }

    /// The descriptor, now the caller's to close (a committer's, to sync).
    func handOver() -> Int32 {
        handedOver = true
        return fd
    }

    func slot(_ sequence: UInt64) -> QueueSegment.Slot {
        var bytes = [UInt8](repeating: 0, count: QueueSegment.entrySize)
        let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, QueueSegment.entrySize, offset(of: sequence)) }
        return n == QueueSegment.entrySize ? .decode(bytes, sequence: sequence) : .empty
    }

    private func offset(of sequence: UInt64) -> off_t {
        off_t((sequence - QueueSegment.first(of: sequence)) * UInt64(QueueSegment.entrySize))
    }

    /// A record's bytes; nil if the file ends before it does.
    func record(_ entry: QueueSegment.Entry) -> Data? {
        var data = Data(count: Int(entry.length))
        let complete = data.withUnsafeMutableBytes { buffer -> Bool in
            var done = 0
            while done < buffer.count {
                let n = pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(entry.offset) + off_t(done))
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return false }
                done += n
            }
            return true
        }
        return complete ? data : nil
    }

    /// Appends `bytes` at the end of the file (never over anything: a record a killed writer left
    /// without an entry stays as dead space) and then writes the entry of `sequence`.
    func append(_ bytes: Data, sequence: UInt64) throws(WormholeError) {
        guard bytes.count <= Int(UInt32.max) else {
            throw WormholeError(.payloadTooLarge, "a queue message of \(bytes.count) bytes does not fit a segment entry (at most \(UInt32.max) bytes); nothing was written")
        }
        let start = max(size, QueueSegment.indexSize)
        let written = bytes.withUnsafeBytes { buffer -> Int32 in
            var done = 0
            while done < buffer.count {
                let n = pwrite(fd, buffer.baseAddress! + done, buffer.count - done, off_t(start + done))
                if n < 0 && errno == EINTR { continue }
                if n < 0 { return errno }
                done += n
            }
            return 0
        }
        if written != 0 {
            // What was written belongs to no entry: cut it off, so a full disk gets its space
            // back and the next pass that fits is taken.
            _ = ftruncate(fd, off_t(max(size, 0)))
            throw .io("append to \(path)", Errno(rawValue: written))
        }
        let entry = QueueSegment.Entry(offset: UInt64(start), length: UInt32(bytes.count),
                                       nanoseconds: Int64(Date().timeIntervalSince1970 * 1e9))
        do {
            try writeEntry(entry.encoded(sequence: sequence), at: offset(of: sequence))
        } catch {
            _ = ftruncate(fd, off_t(max(size, 0))) // the index block may be what did not fit
            throw error
        }
        size = start + bytes.count
    }

    /// Clears the entry of `sequence`: its message is removed (the record stays until the whole
    /// segment goes).
    func clear(_ sequence: UInt64) throws(WormholeError) {
        try writeEntry([UInt8](repeating: 0, count: QueueSegment.entrySize), at: offset(of: sequence))
    }

    /// Clears every entry, before the file is unlinked: a reader that still has it open finds no
    /// message in it, as it would find no file.
    func clearIndex() throws(WormholeError) {
        try writeEntry([UInt8](repeating: 0, count: QueueSegment.indexSize), at: 0)
    }

    private func writeEntry(_ bytes: [UInt8], at offset: off_t) throws(WormholeError) {
        let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, offset) }
        if n != bytes.count { throw .io("write the index of \(path)", Errno(rawValue: n < 0 ? errno : EIO)) }
    }
}

/// The segment a queue listener read last, kept open between reads.
final class SegmentCache {
    var first: UInt64 = 0
    var segment: Segment?

    func drop() {
        segment = nil
        first = 0
    }
}

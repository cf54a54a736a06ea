// SpareFile.swift: the prepared file a synced `file`/`coordinated` pass writes into, so that the
// sync a pass waits for is a data sync of blocks already allocated, not an inode's creation.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import FoundationEssentials
import SystemPackage
import Synchronization

/// Measured on this project's ext4 VM disk (BENCHMARKS.md, "Wormhole on disk"): creating,
/// writing, fsyncing and renaming a new 1 KiB file costs 250-270 µs, but overwriting blocks an
/// earlier fsync made durable and `fdatasync`ing them costs 70-100 µs, below one append with
/// `fdatasync` (105-150 µs). So after each synced replacement the process prepares the next
/// file: an unnamed file (`O_TMPFILE`) in the messages directory, the size of the last message,
/// filled with zeros and fsynced. A pass overwrites it, `fdatasync`s it, gives it a temporary
/// name (`linkat` of /proc/self/fd) and exchanges it with the message (`renameat2`
/// `RENAME_EXCHANGE`), so freeing the old message's inode is not on the way to the listener
/// either: the old file is unlinked after the announcement (`SpareFiles.Replaced.finish`).
///
/// Readers see nothing new: a message file is still a new inode, complete before it is named,
/// and never written again after it was named. A spare is used by the process that made it
/// only (a forked child makes its own), by one pass at a time, and for files up to
/// `SpareFiles.maxSize`; anything else takes the plain path (a new temporary file, fsync,
/// rename). An unnamed file vanishes with a crash, so a spare leaves nothing behind.
final class SpareFiles: Sendable {
    /// Larger messages take the plain path: preparing a spare writes the size of the message
    /// once more, which for a large message costs more than it saves.
    static let maxSize = 64 << 10

    /// Directories a process keeps spares for; past it, another directory's are closed.
    static let maxDirectories = 16

    /// One spare per directory and permissions, per process.
    static let shared = SpareFiles()

    private struct Key: Hashable { let directory: String; let permissions: UInt16 }
    private struct Spare { let fd: Int32; let size: Int; let pid: pid_t }
    /// One spare at a time. Batches of 4 and 8 (one open and write each, then the fsyncs) were
    /// measured: a lower median on this disk but a p99 of 0.9-2.3 ms, the stall of making the
    /// batch landing on another pass (BENCHMARKS.md).
    private let spares = Mutex<[Key: Spare]>([:])

    /// What a replacement leaves to do once the listeners were told: unlink the previous message
    /// (now under a temporary name) and prepare the next spare.
    struct Replaced: Sendable {
        fileprivate let previous: FilePath?
        fileprivate let directory: FilePath
        fileprivate let permissions: FilePermissions
        fileprivate let size: Int
        fileprivate let prepare: Bool

        static let nothing = Replaced(previous: nil, directory: FilePath(), permissions: [], size: 0, prepare: false)

        func finish() {
            if let previous { unlink(previous.string) }
            if prepare { SpareFiles.shared.prepare(in: directory, permissions: permissions, size: size) }
        }
    }

    /// Replaces `destination` with `bytes`, synced, through the spare when there is one; else
    /// through a new temporary file. On any failure the old message is intact and nothing is
    /// left behind.
    func replace(_ destination: FilePath, with bytes: Data, permissions: FilePermissions) throws(WormholeError) -> Replaced {
        let directory = destination.removingLastComponent()
        let eligible = bytes.count <= SpareFiles.maxSize && PosixFiles.canNameUnnamedFiles
        guard eligible, let spare = take(directory, permissions) else {
            try PosixFiles.replaceAtomically(destination, with: bytes, permissions: permissions, sync: true)
            return Replaced(previous: nil, directory: directory, permissions: permissions, size: bytes.count, prepare: eligible)
        }
        defer { close(spare.fd) }
        let written = bytes.withUnsafeBytes { raw -> Bool in
            var done = 0
            while done < raw.count {
                let n = pwrite(spare.fd, raw.baseAddress! + done, raw.count - done, off_t(done))
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return false }
                done += n
            }
            return true
        }
        guard written, spare.size == bytes.count || ftruncate(spare.fd, off_t(bytes.count)) == 0,
              fdatasync(spare.fd) == 0 else {
            throw .io("write a message for \(destination)", Errno(rawValue: errno))
        }
        // A name in the same directory, then exchanged with the message: the rename needs a name.
        var temp = directory.appending(PosixFiles.temporaryName())
        while linkat(AT_FDCWD, "/proc/self/fd/\(spare.fd)", AT_FDCWD, temp.string, AT_SYMLINK_FOLLOW) != 0 {
            guard errno == EEXIST else {
                try PosixFiles.replaceAtomically(destination, with: bytes, permissions: permissions, sync: true)
                return Replaced(previous: nil, directory: directory, permissions: permissions, size: bytes.count, prepare: false)
            }
            temp = directory.appending(PosixFiles.temporaryName())
        }
        // Never exchanged with a directory someone made there: that would hide it under the
        // temporary name. A plain rename fails on it, as the plain path always did.
        var info = stat()
        let isDirectory = lstat(destination.string, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
        if !isDirectory, let exchange = PosixFiles.renameExchange,
           exchange(AT_FDCWD, temp.string, AT_FDCWD, destination.string, 2) == 0 {
            return Replaced(previous: temp, directory: directory, permissions: permissions, size: bytes.count, prepare: true)
        }
        // No message yet (ENOENT), or no exchange on this file system: a plain rename.
        if rename(temp.string, destination.string) != 0 {
            let error = Errno(rawValue: errno)
            unlink(temp.string)
            throw .io("rename to \(destination)", error)
        }
        return Replaced(previous: nil, directory: directory, permissions: permissions, size: bytes.count, prepare: true)
    }

    private func take(_ directory: FilePath, _ permissions: FilePermissions) -> Spare? {
        let key = Key(directory: directory.string, permissions: UInt16(permissions.rawValue))
        guard let spare = spares.withLock({ $0.removeValue(forKey: key) }) else { return nil }
        // Made before a fork by the parent, which may write it too: the child makes its own.
        guard spare.pid == getpid() else { close(spare.fd); return nil }
        return spare
    }

    /// Makes the next spare of `directory`, unless one is there. When it cannot (no `O_TMPFILE`
    /// on this file system, no space), the next pass takes the plain path.
    func prepare(in directory: FilePath, permissions: FilePermissions, size: Int) {
        let key = Key(directory: directory.string, permissions: UInt16(permissions.rawValue))
        if spares.withLock({ $0[key]?.pid == getpid() }) { return }
        let fd = open(directory.string, PosixFiles.unnamedFile | O_RDWR | O_CLOEXEC, permissions.rawValue)
        guard fd >= 0 else { return }
        let zeros = [UInt8](repeating: 0, count: size)
        guard (try? PosixFiles.setExactPermissions(FileDescriptor(rawValue: fd), permissions)) != nil,
              zeros.withUnsafeBytes({ pwrite(fd, $0.baseAddress, size, 0) }) == size, fsync(fd) == 0 else {
            close(fd)
            return
        }
        let spare = Spare(fd: fd, size: size, pid: getpid())
        let dropped = spares.withLock { table -> [Int32] in
            // Another thread of this process made one meanwhile: keep that one.
            if let existing = table[key], existing.pid == getpid() { return [fd] }
            var dropped: [Int32] = []
            if let stale = table.removeValue(forKey: key) { dropped.append(stale.fd) }
            // A process that writes in many directories (a test run) keeps spares for a few.
            while table.count >= SpareFiles.maxDirectories, let other = table.keys.first {
                if let old = table.removeValue(forKey: other) { dropped.append(old.fd) }
            }
            table[key] = spare
            return dropped
        }
        for old in dropped { close(old) }
    }
}

// InPlace.swift: a `file`/`coordinated` pass that writes the message file again where it is,
// under a write lease, instead of replacing it.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import FoundationEssentials
import SystemPackage

/// A pass replaces a message by renaming a complete file over it (or exchanging one with it,
/// SpareFile.swift). On ext4 a rename sets the ctime of the files it moves, which dirties their
/// inodes, so the `fdatasync` of the next pass writes an inode to the disk besides the data and
/// the cache flush: three device writes one after another. Measured on this project's VM disk
/// (BENCHMARKS.md, "Issue 36: the message written in place"): overwrite + `fdatasync` of a
/// 1 KiB file 67-76 µs, the same with an exchange between writes 99-122 µs, and a whole
/// exchange pass 131-146 µs.
///
/// So when it can, a pass writes the new message into the message file itself:
/// - only a message file this process may rewrite: a regular file of its user, with the
///   container's mode and one link, not larger than the new message (a smaller message would
///   need a truncation after the write, and a writer killed between the two would leave a
///   damaged file), and the new message no larger than one page (`maxSize`);
/// - only under a write lease (`F_SETLEASE` `F_WRLCK`), which the kernel grants only while no
///   other descriptor is open on the file: no reader has it open, so none sees it change; and
///   one who opens it while the lease is held waits in `open`, or gets `EWOULDBLOCK` with
///   `O_NONBLOCK` and opens it again a moment later (PosixFiles.readMessage). The lease is held
///   until the message is complete and synced. It has no owner to signal when a reader breaks
///   it (SpareFiles.takeLease); its break signal is set to `SIGURG` (ignored unless handled) all
///   the same, never the default `SIGIO`, which would end the process;
/// - one `pwrite` of at most a page: the kernel copies a page into the page cache whole or not
///   at all, even when the process is killed, so a writer's death leaves the old message or the
///   new one. A power loss during the write may leave a damaged file (on a disk that does not
///   write a 4 KiB block at once): its checksum tells, and readers quarantine and report it.
///
/// Otherwise (no message yet, a reader holding it, another owner, a smaller or larger message)
/// the pass takes the spare or the plain path.
enum InPlace {
    /// One page: written whole or not at all, and one block of the disk.
    static let maxSize = 4096

    /// Writes `bytes` over the message file at `destination`, synced when `sync`; false when
    /// it cannot, and then nothing was changed. Throws only when the write began and failed:
    /// an I/O error of the disk (`fdatasync`), after which the file holds the new message,
    /// complete but not known to be on the disk, and not announced.
    static func write(_ destination: FilePath, with bytes: Data, permissions: FilePermissions,
                      sync: Bool) throws(WormholeError) -> Bool {
        guard !bytes.isEmpty, bytes.count <= maxSize else { return false }
        let fd = open(destination.string, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        guard let file = FileStatus(fd), file.isRegular, file.owner == geteuid(), file.links == 1,
              file.permissions == permissions.rawValue, file.size > 0, file.size <= bytes.count,
              fcntl(fd, SpareFiles.setSignal, SIGURG) == 0, SpareFiles.takeLease(fd) else { return false }
        // Released before the descriptor is closed (defers run last first): complete or not,
        // whoever waits in `open` may read it now.
        defer { _ = fcntl(fd, SpareFiles.setLease, Int32(F_UNLCK)) }
        var written = 0
        repeat {
            written = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        } while written < 0 && errno == EINTR
        // An error copies nothing of a one-page write: the old message is there still.
        guard written >= 0 else { return false }
        guard written == bytes.count else {
            throw .io("write \(destination) in place (\(written) of \(bytes.count) bytes)", .ioError)
        }
        if sync, fdatasync(fd) != 0 {
            throw .io("fdatasync \(destination) (written in place, not announced)", Errno(rawValue: errno))
        }
        return true
    }
}

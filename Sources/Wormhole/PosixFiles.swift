#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import FoundationEssentials
import SystemPackage
import Synchronization

/// The file operations a wormhole needs that Foundation does not give: fsync before rename
/// (`Data.write(options: .atomic)` does not sync), O_NOFOLLOW opens, flock.
/// Built on swift-system's `FileDescriptor`, `FilePath` and `Errno`.
enum PosixFiles {
    /// Creates `path` with `permissions` unless it exists (`mkdir(2)`, then `chmod(2)` so the
    /// process umask cannot narrow a shared directory).
    static func makeDirectory(_ path: FilePath, permissions: FilePermissions) throws(WormholeError) {
        if mkdir(path.string, permissions.rawValue) == 0 {
            if chmod(path.string, permissions.rawValue) != 0 {
                throw .io("chmod \(path)", Errno(rawValue: errno))
            }
        } else if errno != EEXIST {
            throw .io("mkdir \(path)", Errno(rawValue: errno))
        }
    }

    /// Creates every missing directory up to `path`, each with `permissions`.
    static func makeDirectories(_ path: FilePath, permissions: FilePermissions) throws(WormholeError) {
        var partial = FilePath(root: path.root)
        for component in path.components {
            partial.append(component)
            try makeDirectory(partial, permissions: permissions)
        }
    }

    private static let tempCounter = Atomic<UInt64>(0)

    /// A name for a temporary file that no identifier can take (identifiers never start with '.').
    /// Unique per process; a leftover of a dead process with the same pid makes the exclusive
    /// create fail, and the next number is tried.
    static func temporaryName() -> String {
        ".tmp-\(getpid())-\(tempCounter.wrappingAdd(1, ordering: .relaxed).newValue)"
    }

    /// Writes `bytes` to a new temporary file in `directory`, syncs it, and returns its path.
    /// On failure nothing is left behind.
    static func writeTemporary(_ bytes: Data, in directory: FilePath, permissions: FilePermissions,
                               sync: Bool) throws(WormholeError) -> FilePath {
        var temp = directory.appending(temporaryName())
        var fd: FileDescriptor
        while true {
            do {
                fd = try FileDescriptor.open(temp, .writeOnly, options: [.create, .exclusiveCreate, .noFollow, .closeOnExec],
                                             permissions: permissions)
                break
            } catch let error as Errno where error == .fileExists {
                temp = directory.appending(temporaryName())
            } catch {
                throw .io("create \(temp)", error as? Errno ?? .ioError)
            }
        }
        do {
            try setExactPermissions(fd, permissions)
            _ = try bytes.withUnsafeBytes { try fd.writeAll($0) }
            if sync, fsync(fd.rawValue) != 0 { throw Errno(rawValue: errno) }
            try fd.close()
        } catch {
            _ = try? fd.close()
            unlink(temp.string)
            throw .io("write \(temp)", error as? Errno ?? .ioError)
        }
        return temp
    }

    /// Group bits of shared containers must survive the process umask, which `open` applies.
    static func setExactPermissions(_ fd: FileDescriptor, _ permissions: FilePermissions) throws(Errno) {
        guard permissions.contains(.groupRead) else { return }
        if fchmod(fd.rawValue, permissions.rawValue) != 0 { throw Errno(rawValue: errno) }
    }

    /// Replaces `destination` with `bytes` atomically: temporary file, fsync, rename. A reader
    /// sees the old file or the new one, never a part; on any failure the old file is intact.
    static func replaceAtomically(_ destination: FilePath, with bytes: Data, permissions: FilePermissions,
                                  sync: Bool) throws(WormholeError) {
        let directory = destination.removingLastComponent()
        let temp = try writeTemporary(bytes, in: directory, permissions: permissions, sync: sync)
        if rename(temp.string, destination.string) != 0 {
            let error = Errno(rawValue: errno)
            unlink(temp.string)
            throw .io("rename to \(destination)", error)
        }
    }

    /// How long a reader waits for a writer's lease on a message file, in µs (readMessage).
    static let leaseWait: UInt32 = 2_000_000

    /// What is at a message's path, opened without following a link or blocking (a FIFO there
    /// must not hang a reader: `O_NONBLOCK`), and read only if it is a regular file.
    enum MessageRead {
        case missing
        case bytes(Data)
        /// Not a message file at all (a link, FIFO, directory, device…): to quarantine.
        case unusable(String)
        /// A regular file over the reader's limit.
        case tooLarge(Int)
    }

    /// `open(2)` of a file of the container, with `O_NOATIME` where the kernel allows it (the
    /// file's owner, or `CAP_FOWNER`; otherwise `EPERM`, and it is opened without), retrying
    /// `EINTR`. On a `relatime` mount (the usual one) a read of a file written since its last
    /// read sets its access time, which dirties its inode: the writer's next `fdatasync` then
    /// writes the inode to the disk besides the data (BENCHMARKS.md, "reads that leave the
    /// access time alone"). -1 and `errno` on failure.
    static func openQuietly(_ path: String, _ flags: Int32, _ mode: mode_t = 0) -> Int32 {
        // O_NOATIME (<fcntl.h> under _GNU_SOURCE, not imported into Swift): 01000000 on x86,
        // ARM and the other architectures Swift runs on.
        let noAccessTime: Int32 = 0o1000000
        while true {
            var fd = open(path, flags | noAccessTime, mode)
            if fd < 0 && errno == EPERM { fd = open(path, flags, mode) }
            if fd >= 0 || errno != EINTR { return fd }
        }
    }

    /// `EWOULDBLOCK` from `open` is a writer's lease: the message file is being written again in
    /// place (InPlace.swift), or the look-up found a replaced message its writer is writing again
    /// as its spare (SpareFile.swift). A writer holds a lease only until the message it writes is
    /// complete and synced, so the path is opened again after a pause that doubles from 50 µs,
    /// for up to `leaseWait`; past it the error is reported (a lease held that long is not ours).
    static func readMessage(_ path: FilePath, limit: Int) throws(WormholeError) -> MessageRead {
        var fd: FileDescriptor
        var pause: UInt32 = 50, waited: UInt32 = 0
        do {
            while true {
                do {
                    let raw = openQuietly(path.string, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
                    guard raw >= 0 else { throw Errno(rawValue: errno) }
                    fd = FileDescriptor(rawValue: raw)
                    break
                } catch .wouldBlock where waited < leaseWait {
                    usleep(pause)
                    waited += pause
                    pause = min(pause * 2, 20_000)
                }
            }
        } catch let error as Errno where error == .noSuchFileOrDirectory {
            return .missing
        } catch let error as Errno where error == .tooManySymbolicLinkLevels {
            return .unusable("a symbolic link")
        } catch let error as Errno where error == .noSuchAddressOrDevice {
            return .unusable("a socket or device")
        } catch let error as Errno where error == .wouldBlock {
            throw .io("open \(path): a writer's lease has kept it for over \(leaseWait / 1_000_000) s", error)
        } catch {
            throw .io("open \(path)", error as? Errno ?? .ioError)
        }
        defer { _ = try? fd.close() }
        guard let info = FileStatus(fd.rawValue) else { throw .io("statx \(path)", Errno(rawValue: errno)) }
        switch info.type {
        case S_IFREG: break
        case S_IFDIR: return .unusable("a directory")
        case S_IFIFO: return .unusable("a FIFO")
        default: return .unusable("not a regular file")
        }
        let size = info.size
        guard size <= limit else { return .tooLarge(size) }
        var data = Data(count: size)
        do {
            let read = try data.withUnsafeMutableBytes { buffer in
                var done = 0
                while done < size {
                    let n = try fd.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]))
                    if n == 0 { break }
                    done += n
                }
                return done
            }
            if read < size { data.removeSubrange(read...) }
        } catch {
            throw .io("read \(path)", error as? Errno ?? .ioError)
        }
        return .bytes(data)
    }

    /// Opens (or creates) a small control file of the container (a lock, a queue's state, a
    /// cursor) for reading and writing: never through a link, never blocking on a FIFO, and only
    /// if it is a regular file; anything else is refused with a clear error.
    static func openControlFile(_ path: FilePath, create: Bool, permissions: FilePermissions) throws(WormholeError) -> FileDescriptor {
        let raw = openQuietly(path.string, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | (create ? O_CREAT : 0), permissions.rawValue)
        guard raw >= 0 else {
            let code = Errno(rawValue: errno)
            if code == .tooManySymbolicLinkLevels || code == .noSuchAddressOrDevice {
                throw WormholeError(.unsafeContainer, "\(path) is not a regular file (a link, socket or device); remove it")
            }
            throw .io("open \(path)", code)
        }
        let fd = FileDescriptor(rawValue: raw)
        // Type only (statx): asking for its times would make its next write dirty its inode.
        guard let info = FileStatus(raw), info.isRegular else {
            _ = try? fd.close()
            throw WormholeError(.unsafeContainer, "\(path) is not a regular file (a FIFO, directory or device); remove it")
        }
        return fd
    }

    /// Names in `directory` that do not start with '.', or [] if it does not exist.
    static func listDirectory(_ directory: FilePath) throws(WormholeError) -> [String] {
        guard let dir = opendir(directory.string) else {
            if errno == ENOENT { return [] }
            throw .io("opendir \(directory)", Errno(rawValue: errno))
        }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            if !name.hasPrefix(".") { names.append(name) }
        }
        return names.sorted()
    }

    /// A file read with read(2) to its end (at most 16 MiB): a /proc file reports no size, and
    /// Foundation's `String(contentsOfFile:)` gives only its first page (4 KiB) of one.
    static func readWhole(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 || bytes.count + n > 16 << 20 { return nil }
            if n == 0 { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(contentsOf: chunk[0..<n])
        }
    }

    /// Whether `path` is on tmpfs or ramfs: the file system type of the mount that holds it, from
    /// /proc/self/mountinfo (Glibc's Swift module does not export statfs(2), which would tell).
    static func isInMemory(_ path: FilePath) -> Bool {
        guard let resolved = realpath(path.string, nil) else { return false }
        let real = String(cString: resolved)
        free(resolved)
        guard let table = readWhole("/proc/self/mountinfo") else { return false }
        var best: (length: Int, type: Substring) = (-1, "")
        for line in table.split(separator: "\n") {
            // "id parent major:minor root mountpoint options … - fstype source superoptions"
            let fields = line.split(separator: " ")
            guard fields.count > 4, let dash = fields.firstIndex(of: "-"), dash + 1 < fields.count else { continue }
            let mountPoint = fields[4].split(separator: "\\040", omittingEmptySubsequences: false).joined(separator: " ")
            let covers = mountPoint == "/" || real == mountPoint || real.hasPrefix(mountPoint + "/")
            if covers, mountPoint.count > best.length { best = (mountPoint.count, fields[dash + 1]) }
        }
        return best.type == "tmpfs" || best.type == "ramfs"
    }

    /// `O_TMPFILE`, a macro Swift does not import: `__O_TMPFILE | O_DIRECTORY`, with
    /// `__O_TMPFILE` 020000000 on x86-64, arm64 and the other architectures of asm-generic.
    static let unnamedFile: Int32 = 0o20000000 | O_DIRECTORY

    /// Whether an unnamed file can be given a name: `linkat` of /proc/self/fd/N (the other way,
    /// `AT_EMPTY_PATH`, needs CAP_DAC_READ_SEARCH). Not without /proc (a chroot).
    static let canNameUnnamedFiles = access("/proc/self/fd", X_OK) == 0

    /// glibc's `renameat2` (2.28 and later), which Swift's Glibc module does not declare;
    /// called with `RENAME_EXCHANGE` (2, from <linux/fs.h>). Nil without it: a plain rename.
    static let renameExchange: (@convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32)? =
        dlsym(nil, "renameat2").map { unsafeBitCast($0, to: (@convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32).self) }

    /// Removes a file; a missing file is not an error.
    static func remove(_ path: FilePath) throws(WormholeError) {
        if unlink(path.string) != 0 && errno != ENOENT { throw .io("unlink \(path)", Errno(rawValue: errno)) }
    }
}

/// What a wormhole asks of a file's status, from `statx(2)` without its time stamps. On Linux
/// 6.13 and later (multigrain time stamps) a stat that asks for a file's ctime or mtime makes
/// the file's next write take a fine-grained time, which dirties its inode: the writer's next
/// `fdatasync` then writes the inode to the disk too, one more device write on every pass
/// (BENCHMARKS.md, "Issue 36: the message written in place"). `fstat` and `lstat` ask for
/// them; this does not. Where `statx` is missing (glibc before 2.28, Linux before 4.11) it falls
/// back to them.
struct FileStatus {
    /// The `S_IFMT` bits of the mode.
    var type: mode_t
    /// The permission bits (`& 0o7777`).
    var permissions: mode_t
    var links: UInt32
    var owner: uid_t
    var size: Int
    /// Device and inode, compared only with another `FileStatus`'s.
    var device: UInt64
    var inode: UInt64

    var isRegular: Bool { type == S_IFREG }
    var isDirectory: Bool { type == S_IFDIR }

    /// The status of an open descriptor; nil if it cannot be had.
    init?(_ fd: Int32) {
        guard let status = FileStatus.query(fd, "", 0x1000 /* AT_EMPTY_PATH */) else { return nil }
        self = status
    }

    /// The status of what `path` names, a link itself rather than what it points to.
    init?(path: String) {
        guard let status = FileStatus.query(AT_FDCWD, path, 0x100 /* AT_SYMLINK_NOFOLLOW */) else { return nil }
        self = status
    }

    private init(type: mode_t, permissions: mode_t, links: UInt32, owner: uid_t, size: Int, device: UInt64, inode: UInt64) {
        (self.type, self.permissions, self.links, self.owner) = (type, permissions, links, owner)
        (self.size, self.device, self.inode) = (size, device, inode)
    }

    private init(_ info: stat) {
        type = info.st_mode & S_IFMT
        permissions = info.st_mode & 0o7777
        links = UInt32(info.st_nlink)
        owner = info.st_uid
        size = Int(info.st_size)
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }

    /// `statx(dirfd, path, flags, mask, buffer)` of glibc, which Swift's Glibc module does not
    /// declare.
    private typealias Statx = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UInt32, UnsafeMutableRawPointer) -> Int32
    private static let statx: Statx? = dlsym(nil, "statx").map { unsafeBitCast($0, to: Statx.self) }
    /// STATX_TYPE | MODE | NLINK | UID | INO | SIZE: no time stamp.
    private static let mask: UInt32 = 0x1 | 0x2 | 0x4 | 0x8 | 0x100 | 0x200

    private static func query(_ dirfd: Int32, _ path: String, _ flags: Int32) -> FileStatus? {
        if let statx {
            // struct statx (<linux/stat.h>), 256 bytes: the fields read below are at fixed offsets.
            var buffer = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0),
                          UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0),
                          UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0),
                          UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
            var failure: Int32 = 0
            let result = withUnsafeMutableBytes(of: &buffer) { raw -> FileStatus? in
                guard statx(dirfd, path, flags, mask, raw.baseAddress!) == 0 else { failure = errno; return nil }
                // A file system that does not give them all: asked again the classic way.
                guard raw.load(fromByteOffset: 0, as: UInt32.self) & mask == mask else { failure = ENOSYS; return nil }
                let mode = mode_t(raw.load(fromByteOffset: 28, as: UInt16.self))
                return FileStatus(type: mode & S_IFMT, permissions: mode & 0o7777,
                                  links: raw.load(fromByteOffset: 16, as: UInt32.self),
                                  owner: raw.load(fromByteOffset: 20, as: UInt32.self),
                                  size: Int(raw.load(fromByteOffset: 40, as: UInt64.self)),
                                  device: UInt64(raw.load(fromByteOffset: 136, as: UInt32.self)) << 32
                                      | UInt64(raw.load(fromByteOffset: 140, as: UInt32.self)),
                                  inode: raw.load(fromByteOffset: 32, as: UInt64.self))
            }
            if let result { return result }
            // ENOSYS: a kernel before statx; EPERM: a seccomp filter that does not know it.
            guard failure == ENOSYS || failure == EPERM else { errno = failure; return nil }
        }
        var info = stat()
        let done = path.isEmpty ? fstat(dirfd, &info) : lstat(path, &info)
        return done == 0 ? FileStatus(info) : nil
    }
}

/// An advisory lock on a file, across processes (`flock(2)`). Each lock opens its own file
/// description, so two threads of one process exclude each other too.
final class FileLock {
    let fd: FileDescriptor
    let path: FilePath

    /// Opens (creating) `path` and takes the lock; `exclusive` for writers, shared for readers.
    init(_ path: FilePath, exclusive: Bool, permissions: FilePermissions) throws(WormholeError) {
        fd = try PosixFiles.openControlFile(path, create: true, permissions: permissions)
        self.path = path
        try? PosixFiles.setExactPermissions(fd, permissions)
        while flock(fd.rawValue, exclusive ? LOCK_EX : LOCK_SH) != 0 {
            if errno == EINTR { continue }
            let error = Errno(rawValue: errno)
            _ = try? fd.close()
            throw .io("flock \(path)", error)
        }
    }

    /// Releases the lock (closing the descriptor releases it).
    func unlock() { _ = try? fd.close() }
}

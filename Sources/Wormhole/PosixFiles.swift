#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import FoundationEssentials
import SystemPackage
import Synchronization

/// The file operations a wormhole needs that Foundation does not give: fsync before rename
/// (`Data.write(options: .atomic)` does not sync), O_NOFOLLOW opens, link without replace, flock.
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

    /// `EWOULDBLOCK` from `open` is a writer's lease on a replaced message it is writing again
    /// (SpareFile.swift): the look-up found that file before it lost the message's name, and the
    /// path names another by now, so it is opened again (a few times, then reported).
    static func readMessage(_ path: FilePath, limit: Int) throws(WormholeError) -> MessageRead {
        var fd: FileDescriptor
        var leased = 0
        do {
            while true {
                do {
                    fd = try FileDescriptor.open(path, .readOnly, options: [.noFollow, .closeOnExec, .nonBlocking])
                    break
                } catch .wouldBlock where leased < 8 {
                    leased += 1
                }
            }
        } catch let error as Errno where error == .noSuchFileOrDirectory {
            return .missing
        } catch let error as Errno where error == .tooManySymbolicLinkLevels {
            return .unusable("a symbolic link")
        } catch let error as Errno where error == .noSuchAddressOrDevice {
            return .unusable("a socket or device")
        } catch {
            throw .io("open \(path)", error as? Errno ?? .ioError)
        }
        defer { _ = try? fd.close() }
        var info = stat()
        guard fstat(fd.rawValue, &info) == 0 else { throw .io("fstat \(path)", Errno(rawValue: errno)) }
        switch info.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFDIR: return .unusable("a directory")
        case S_IFIFO: return .unusable("a FIFO")
        default: return .unusable("not a regular file")
        }
        let size = Int(info.st_size)
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
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(path, .readWrite, options: create ? [.create, .noFollow, .closeOnExec, .nonBlocking]
                                                                           : [.noFollow, .closeOnExec, .nonBlocking],
                                         permissions: permissions)
        } catch {
            let errno = error as? Errno ?? .ioError
            if errno == .tooManySymbolicLinkLevels || errno == .noSuchAddressOrDevice {
                throw WormholeError(.unsafeContainer, "\(path) is not a regular file (a link, socket or device); remove it")
            }
            throw .io("open \(path)", errno)
        }
        var info = stat()
        guard fstat(fd.rawValue, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
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

// SpareFile.swift: the prepared file a synced `file`/`coordinated` pass writes into when it
// cannot write the message in place (InPlace.swift), so that the sync a pass waits for is a data
// sync of blocks already allocated, not an inode's creation.
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
/// `fdatasync` (105-150 µs). So a pass writes into a spare, a file of the process whose blocks
/// are on the disk already: it overwrites it, `fdatasync`s it and exchanges it with the message
/// (`renameat2` `RENAME_EXCHANGE`), then announces.
///
/// The next spare is the message just replaced (`Replaced.finish`), now under the spare's
/// `.tmp-<pid>-<n>` name: its blocks were synced when it was written. It keeps that name (a file
/// whose last name is removed cannot be given one again), so a process has at most one such file
/// per directory while it runs, removed at exit; a crash leaves it, and readers skip names that
/// start with '.'. It is written again only while nobody else has it open, which the kernel tells
/// by a write lease (`F_SETLEASE` `F_WRLCK` fails while any other descriptor is open on the file).
/// The lease is held while it is written and synced: anyone who opens it meanwhile (a reader
/// whose look-up of the message's path found it before the exchange, or someone opening the
/// `.tmp-` name) waits in `open` until it is complete again, or, opening with `O_NONBLOCK` as
/// readers do, gets `EWOULDBLOCK` and opens the path again. So nobody reads the file while it is
/// written. The kernel tells the lease holder of such an `open` with a signal: `SIGURG` here
/// (`F_SETSIG`), ignored unless the program handles it, not the default `SIGIO`, which would end
/// the process. No inode is made, no zeros written and nothing unlinked after a pass, where a new
/// spare cost 169-192 µs and the unlink 66-87 µs.
///
/// When the replaced message cannot be reused (another owner, another mode, more than one link,
/// over `maxSize`), or a reader holds it when the next pass comes, it is unlinked and a spare is
/// made as before: an unnamed file (`O_TMPFILE`) the size of the last message, filled with zeros
/// and fsynced, named (`linkat` of /proc/self/fd) just before its exchange. A spare is used by
/// the process that made it only (a forked child makes its own), by one pass at a time, and for
/// files up to `SpareFiles.maxSize`; anything else takes the plain path (a new temporary file,
/// fsync, rename).
final class SpareFiles: Sendable {
    /// Larger messages take the plain path: preparing a spare writes the size of the message
    /// once more, which for a large message costs more than it saves.
    static let maxSize = 64 << 10

    /// Directories a process keeps spares for; past it, another directory's are closed.
    static let maxDirectories = 16

    /// One spare per directory and permissions, per process.
    static let shared = SpareFiles()

    private struct Key: Hashable { let directory: String; let permissions: UInt16 }
    /// `name`: a replaced message, which keeps its `.tmp-…` name and is written under a lease;
    /// nil: a spare made for the purpose, without a name. `file`: its device and inode, to know
    /// the name still names it.
    private struct Spare {
        let fd: Int32
        let size: Int
        let pid: pid_t
        let name: FilePath?
        var file: (device: UInt64, inode: UInt64) = (0, 0)

        /// Closes it, and removes its name if this process gave it (a forked child leaves its
        /// parent's).
        func discard() {
            close(fd)
            if let name, pid == getpid() { unlink(name.string) }
        }
    }
    /// One spare at a time. Batches of 4 and 8 (one open and write each, then the fsyncs) were
    /// measured: a lower median on this disk but a p99 of 0.9-2.3 ms, the stall of making the
    /// batch landing on another pass (BENCHMARKS.md).
    private let spares = Mutex<[Key: Spare]>([:])

    /// What a replacement leaves to do once the listeners were told: take the previous message
    /// (now under a temporary name) as the next spare, or else unlink it and prepare one.
    struct Replaced: Sendable {
        fileprivate let previous: FilePath?
        fileprivate let directory: FilePath
        fileprivate let permissions: FilePermissions
        fileprivate let size: Int
        fileprivate let prepare: Bool

        static let nothing = Replaced(previous: nil, directory: FilePath(), permissions: [], size: 0, prepare: false)

        func finish() {
            if let previous {
                if SpareFiles.shared.adopt(previous, in: directory, permissions: permissions) { return }
                unlink(previous.string)
            }
            if prepare { SpareFiles.shared.prepare(in: directory, permissions: permissions, size: size) }
        }
    }

    /// Replaces `destination` with `bytes`, synced, through the spare when there is one; else
    /// through a new temporary file. On any failure the old message is intact and nothing is
    /// left behind.
    func replace(_ destination: FilePath, with bytes: Data, permissions: FilePermissions) throws(WormholeError) -> Replaced {
        let directory = destination.removingLastComponent()
        let eligible = bytes.count <= SpareFiles.maxSize && PosixFiles.canNameUnnamedFiles
        let plain = { () throws(WormholeError) -> Replaced in
            try PosixFiles.replaceAtomically(destination, with: bytes, permissions: permissions, sync: true)
            return Replaced(previous: nil, directory: directory, permissions: permissions, size: bytes.count, prepare: eligible)
        }
        guard eligible, let spare = take(directory, permissions) else { return try plain() }
        // A replaced message is written only under a write lease, which the kernel grants only
        // while no other descriptor is open on it (a reader that still has it). Growing, it gets
        // its blocks first, past its end (`FALLOC_FL_KEEP_SIZE`: nothing a reader could see), so
        // a full disk fails here, before any byte of it changed.
        if spare.name != nil {
            guard SpareFiles.takeLease(spare.fd) else { spare.discard(); return try plain() }
            guard bytes.count <= spare.size || SpareFiles.allocate?(spare.fd, 1, 0, off_t(bytes.count)) == 0 else {
                _ = fcntl(spare.fd, SpareFiles.setLease, Int32(F_UNLCK))
                spare.discard()
                return try plain()
            }
        }
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
        let synced = written && (spare.size == bytes.count || ftruncate(spare.fd, off_t(bytes.count)) == 0)
            && fdatasync(spare.fd) == 0
        let error = errno
        // Complete (or failed): whoever waits in `open` for it may read it now.
        if spare.name != nil { _ = fcntl(spare.fd, SpareFiles.setLease, Int32(F_UNLCK)) }
        guard synced else {
            spare.discard()
            throw .io("write a message for \(destination)", Errno(rawValue: error))
        }
        // The exchange needs a name: a reused spare has its own; a made one gets one in the same
        // directory. A reused spare's name must still be that file.
        var temp: FilePath
        if let name = spare.name {
            guard let named = FileStatus(path: name.string), named.device == spare.file.device,
                  named.inode == spare.file.inode else {
                close(spare.fd)
                return try plain()
            }
            temp = name
            close(spare.fd)
        } else {
            defer { close(spare.fd) }
            temp = directory.appending(PosixFiles.temporaryName())
            while linkat(AT_FDCWD, "/proc/self/fd/\(spare.fd)", AT_FDCWD, temp.string, AT_SYMLINK_FOLLOW) != 0 {
                guard errno == EEXIST else {
                    try PosixFiles.replaceAtomically(destination, with: bytes, permissions: permissions, sync: true)
                    return Replaced(previous: nil, directory: directory, permissions: permissions, size: bytes.count, prepare: false)
                }
                temp = directory.appending(PosixFiles.temporaryName())
            }
        }
        // Never exchanged with a directory someone made there: that would hide it under the
        // temporary name. A plain rename fails on it, as the plain path always did.
        let isDirectory = FileStatus(path: destination.string)?.isDirectory == true
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

    /// Takes the message a pass replaced, now at `previous` (a `.tmp-…` name this process gave),
    /// as the next spare of `directory`, keeping that name (a file whose name was removed cannot
    /// be given one again): only a regular file of this process's user with the container's mode
    /// and one link, up to `maxSize`. False when it is not taken (the caller unlinks it and makes
    /// a spare). Whether another process has it open is asked when it is written (the lease in
    /// `replace`). The names of a process's spares are removed when it exits.
    func adopt(_ previous: FilePath, in directory: FilePath, permissions: FilePermissions) -> Bool {
        let key = Key(directory: directory.string, permissions: UInt16(permissions.rawValue))
        let pid = getpid()
        if spares.withLock({ $0[key]?.pid == pid }) { return false }
        let fd = open(previous.string, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return false }
        guard let info = FileStatus(fd), info.isRegular, info.owner == geteuid(), info.links == 1,
              info.permissions == permissions.rawValue, info.size <= SpareFiles.maxSize,
              fcntl(fd, SpareFiles.setSignal, SIGURG) == 0 else {
            close(fd)
            return false
        }
        _ = SpareFiles.removeNamesAtExit
        store(Spare(fd: fd, size: info.size, pid: pid, name: previous, file: (info.device, info.inode)), key)
        return true
    }

    /// Registered once, by the first spare that keeps a name.
    private static let removeNamesAtExit: Void = {
        atexit { if !ForkedChild.isChild { SpareFiles.shared.removeNames() } } // a child's exit: ForkedChild.swift
    }()

    /// Removes the names of this process's spares (at exit): nothing of a spare stays behind but
    /// after a crash, a `.tmp-…` file, which readers skip.
    func removeNames() {
        let pid = getpid()
        let named = spares.withLock { table -> [Spare] in
            let named = table.filter { $0.value.pid == pid && $0.value.name != nil }
            for key in named.keys { table.removeValue(forKey: key) }
            return Array(named.values)
        }
        for spare in named { spare.discard() }
    }

    /// `F_SETLEASE` and `F_SETSIG` (<fcntl.h>, `_GNU_SOURCE`), which Swift's Glibc module does not
    /// declare: the same numbers on every Linux architecture.
    static let setLease: Int32 = 1024
    static let setSignal: Int32 = 10

    /// A write lease on `fd`, and no signal to the application when a reader breaks it. The
    /// kernel sends a lease's break signal to the lease's owner: by default the process, where a
    /// thread that does not block the signal takes it, and the application's handler for it, if
    /// it has one (`SIGURG` here: Go's runtime has one, for preemption), would run at every
    /// broken lease. Our writers never wait for the signal: they release the lease once the
    /// message is complete. So before the lease the file's owner is made a thread of ours that
    /// blocks every signal and never runs (`LeaseOwner`); the lease keeps an owner already set,
    /// and a signal sent to that thread stays pending there. A reader that opens meanwhile waits,
    /// or gets `EWOULDBLOCK`, as before.
    static func takeLease(_ fd: Int32) -> Bool {
        if let owner = LeaseOwner.thread {
            var ex = (Int32(0), owner) // struct f_owner_ex: F_OWNER_TID, the thread
            _ = withUnsafeMutablePointer(to: &ex) { fcntl(fd, LeaseOwner.setOwnerEx, $0) }
        }
        return fcntl(fd, setLease, Int32(F_WRLCK)) == 0
    }

    /// glibc's `fallocate`, which Swift's Glibc module does not declare; called with
    /// `FALLOC_FL_KEEP_SIZE` (1). Nil without it: a reused spare does not grow.
    static let allocate: (@convention(c) (Int32, Int32, off_t, off_t) -> Int32)? =
        dlsym(nil, "fallocate").map { unsafeBitCast($0, to: (@convention(c) (Int32, Int32, off_t, off_t) -> Int32).self) }

    private func take(_ directory: FilePath, _ permissions: FilePermissions) -> Spare? {
        let key = Key(directory: directory.string, permissions: UInt16(permissions.rawValue))
        guard let spare = spares.withLock({ $0.removeValue(forKey: key) }) else { return nil }
        // Made before a fork by the parent, which may write it too: the child makes its own.
        guard spare.pid == getpid() else { spare.discard(); return nil }
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
        store(Spare(fd: fd, size: size, pid: getpid(), name: nil), key)
    }

    private func store(_ spare: Spare, _ key: Key) {
        let dropped = spares.withLock { table -> [Spare] in
            // Another thread of this process made one meanwhile: keep that one.
            if let existing = table[key], existing.pid == getpid() { return [spare] }
            var dropped: [Spare] = []
            if let stale = table.removeValue(forKey: key) { dropped.append(stale) }
            // A process that writes in many directories (a test run) keeps spares for a few.
            while table.count >= SpareFiles.maxDirectories, let other = table.keys.first {
                if let old = table.removeValue(forKey: other) { dropped.append(old) }
            }
            table[key] = spare
            return dropped
        }
        for old in dropped { old.discard() }
    }
}

/// The thread that owns the files a writer holds a lease on (SpareFiles.takeLease): started on
/// the first lease, it blocks every signal from its first instruction and waits for ever, so a
/// lease's break signal stays pending on it and never reaches the application. A child after
/// `fork()` starts its own (the parent's thread is not in it, and its id may one day name
/// another process's thread). No lock: a child inherits a lock as it was at the fork, held by a
/// thread of its parent's that it does not have; the owner is one atomic word.
enum LeaseOwner {
    /// `F_SETOWN_EX` (<fcntl.h>, `_GNU_SOURCE`, not in Swift's Glibc module).
    static let setOwnerEx: Int32 = 15

    /// This process's owner thread; nil if it could not be started (then the lease's owner is the
    /// process, as the kernel makes it by default).
    static var thread: pid_t? {
        let pid = getpid()
        var known = owner.load(ordering: .acquiring)
        while true {
            if known != 0, Self.pid(of: known) == pid { return tid(of: known) }
            guard let (tid, handle) = start() else { return nil }
            let mine = UInt64(UInt32(bitPattern: pid)) << 32 | UInt64(UInt32(bitPattern: tid))
            let (stored, current) = owner.compareExchange(expected: known, desired: mine, ordering: .acquiringAndReleasing)
            if stored { return tid }
            // Another thread of this process started one at the same time, and it won: ours ends.
            pthread_cancel(handle)
            known = current
        }
    }

    /// The owner: its process id in the high half, its thread id in the low; 0 until there is one.
    private static let owner = Atomic<UInt64>(0)
    private static func pid(of word: UInt64) -> pid_t { pid_t(bitPattern: UInt32(truncatingIfNeeded: word >> 32)) }
    private static func tid(of word: UInt64) -> pid_t { pid_t(bitPattern: UInt32(truncatingIfNeeded: word)) }

    /// glibc's `gettid` (2.30), which Swift's Glibc module does not declare.
    private static let gettid: (@convention(c) () -> pid_t)? =
        dlsym(nil, "gettid").map { unsafeBitCast($0, to: (@convention(c) () -> pid_t).self) }

    /// A new owner thread: its id and its handle.
    private static func start() -> (pid_t, pthread_t)? {
        guard gettid != nil else { return nil }
        // The new thread writes its id here once; this thread waits for it, then frees it.
        let started = UnsafeMutablePointer<Atomic<pid_t>>.allocate(capacity: 1)
        started.initialize(to: Atomic<pid_t>(0))
        defer { started.deinitialize(count: 1); started.deallocate() }
        // Every signal blocked in this thread while it makes the new one, which starts with
        // this mask: no signal can reach it even before its first instruction. (glibc keeps the
        // one `pthread_cancel` uses.)
        var all = sigset_t(), previous = sigset_t()
        sigfillset(&all)
        pthread_sigmask(SIG_SETMASK, &all, &previous)
        var handle = pthread_t()
        let made = pthread_create(&handle, nil, { argument in
            let started = argument!.assumingMemoryBound(to: Atomic<pid_t>.self)
            started.pointee.store(LeaseOwner.gettid!(), ordering: .releasing)
            while true { pause() } // every signal blocked: never returns (cancelled, it ends here)
        }, started)
        pthread_sigmask(SIG_SETMASK, &previous, nil)
        guard made == 0 else { return nil }
        pthread_detach(handle)
        while started.pointee.load(ordering: .acquiring) == 0 { sched_yield() }
        return (started.pointee.load(ordering: .acquiring), handle)
    }
}

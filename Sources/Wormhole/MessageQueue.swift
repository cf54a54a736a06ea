#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import FoundationEssentials
import SystemPackage

/// `queue` transiting: a lossless FIFO per identifier (docs/PROTOCOL.md, "Queues").
///
///     queues/<identifier>/.state             flock target; head, tail, bytes, generation (4 × UInt64 LE)
///     queues/<identifier>/<20-digit seq>     one immutable message each, linked in when complete
///     queues/<identifier>/.cursors/<name>    a named listener's next sequence (UInt64 LE)
///
/// Writers append under the exclusive lock, so sequence numbers follow the order of passes and
/// each writer's messages stay in its order. Message files are never modified, only removed from
/// the old end, so readers need no lock to read them.
struct MessageQueue: Sendable {
    let layout: Layout
    let identifier: String
    let configuration: WormholeConfiguration

    var directory: FilePath { layout.queue(identifier) }
    var statePath: FilePath { directory.appending(".state") }
    var cursors: FilePath { directory.appending(".cursors") }

    func path(of sequence: UInt64) -> FilePath {
        let digits = String(sequence)
        return directory.appending(String(repeating: "0", count: max(0, 20 - digits.count)) + digits)
    }

    struct State: Equatable {
        /// The next sequence to assign.
        var head: UInt64 = 1
        /// The oldest sequence still kept.
        var tail: UInt64 = 1
        /// Bytes of the kept message files.
        var bytes: UInt64 = 0
        /// A random number chosen when the queue is made: a queue removed and made again under a
        /// running listener has another, so the listener knows its cursor means nothing there.
        /// 0 in a queue written before generations existed (24-byte state).
        var generation: UInt64 = 0
        var count: UInt64 { head - tail }
    }

    func prepare() throws(WormholeError) {
        for made in [directory, cursors] {
            try PosixFiles.makeDirectory(made, permissions: layout.directoryPermissions)
            try GroupContainer.checkSubdirectory(made, shared: layout.shared)
        }
    }

    /// Locks the queue's state file. The directories are made only when the open fails (a new
    /// queue): every pass and every caught-up read takes this lock.
    func lock(exclusive: Bool) throws(WormholeError) -> FileLock {
        if let lock = try? FileLock(statePath, exclusive: exclusive, permissions: layout.filePermissions) { return lock }
        try prepare()
        return try FileLock(statePath, exclusive: exclusive, permissions: layout.filePermissions)
    }

    func readState(_ lock: FileLock) throws(WormholeError) -> State {
        var words = [UInt64](repeating: 0, count: 4)
        let n = words.withUnsafeMutableBytes { pread(lock.fd.rawValue, $0.baseAddress, 32, 0) }
        if n < 0 { throw .io("read \(statePath)", Errno(rawValue: errno)) }
        guard n == 24 || n == 32 else { return State() }  // new queue
        let state = State(head: UInt64(littleEndian: words[0]), tail: UInt64(littleEndian: words[1]),
                          bytes: UInt64(littleEndian: words[2]), generation: n == 32 ? UInt64(littleEndian: words[3]) : 0)
        guard state.head >= 1, state.tail >= 1, state.tail <= state.head else {
            throw WormholeError(.corruptMessage, "queue state \(statePath) is damaged (head \(state.head), tail \(state.tail))")
        }
        return state
    }

    func writeState(_ state: State, _ lock: FileLock) throws(WormholeError) {
        let words = [state.head.littleEndian, state.tail.littleEndian, state.bytes.littleEndian, state.generation.littleEndian]
        let n = words.withUnsafeBytes { pwrite(lock.fd.rawValue, $0.baseAddress, 32, 0) }
        if n != 32 { throw .io("write \(statePath)", Errno(rawValue: n < 0 ? errno : EIO)) }
    }

    /// The state, given a generation if it has none yet (a new queue, or one written before
    /// generations): under the exclusive lock, so every process agrees on it.
    func initializedState(_ lock: FileLock) throws(WormholeError) -> State {
        var state = try readState(lock)
        if state.generation == 0 {
            state.generation = UInt64.random(in: 1 ... .max)
            try writeState(state, lock)
        }
        return state
    }

    /// Makes the queue's directories and its state (with a generation): what a listener needs
    /// before it remembers where it starts.
    func prepareState() throws(WormholeError) -> State {
        try prepare()
        let lock = try lock(exclusive: true)
        defer { lock.unlock() }
        return try initializedState(lock)
    }

    /// The state as readers see it (shared lock, held only for the read).
    func currentState() throws(WormholeError) -> State {
        let lock = try lock(exclusive: false)
        defer { lock.unlock() }
        return try readState(lock)
    }

    /// Appends a message; returns its sequence number. Applies retention first.
    ///
    /// With `syncToDisk` and a `committer`, the message is not synced here: its file, whole,
    /// linked and counted, is handed to the committer, which syncs it with the others of its
    /// round and then announces it (GroupCommit.swift). Without a committer the file is synced
    /// before it is linked, and the caller announces.
    /// - Throws: `.queueFull` (policy `.reject`), `.diskFull`, `.io`.
    @discardableResult
    func append(_ envelope: Envelope, committer: GroupCommit? = nil) throws(WormholeError) -> UInt64 {
        let bytes = envelope.encoded()
        let lock = try lock(exclusive: true)
        defer { lock.unlock() }
        var state = try initializedState(lock)
        let grouped = configuration.syncToDisk && committer != nil
        let file = try MessageFile(bytes, in: directory, permissions: layout.filePermissions,
                                   sync: configuration.syncToDisk && !grouped)
        defer { file.discard() }
        try applyRetention(&state, adding: UInt64(bytes.count))
        var sequence = state.head
        // A writer that died between linking its file and saving the state left the file behind:
        // it is a complete message, so it is kept and counted, and this one goes after it.
        while try !file.link(to: path(of: sequence)) {
            state.bytes += fileSize(path(of: sequence))
            sequence += 1
        }
        state.head = sequence + 1
        state.bytes += UInt64(bytes.count)
        try writeState(state, lock)
        if grouped, let committer { try committer.add(file.release(), identifier: identifier) }
        return sequence
    }

    private func applyRetention(_ state: inout State, adding size: UInt64) throws(WormholeError) {
        let retention = configuration.queue
        // Read by every named listener: no longer needed.
        if let consumed = try minimumCursor() {
            while state.tail < min(consumed, state.head) { try removeOldest(&state) }
        }
        // Too old.
        let cutoff = Date().timeIntervalSince1970 - retention.maxAge
        while state.tail < state.head, modificationTime(path(of: state.tail)) ?? 0 < cutoff {
            try removeOldest(&state)
        }
        // Over the limits.
        while state.count + 1 > UInt64(retention.maxMessages) || state.bytes + size > UInt64(retention.maxBytes) {
            guard retention.overflow == .dropOldest, state.tail < state.head else {
                throw WormholeError(.queueFull,
                    "queue '\(identifier)' holds \(state.count) messages, \(state.bytes) bytes; adding \(size) bytes would pass its limit (\(retention.maxMessages) messages, \(retention.maxBytes) bytes); nothing was written")
            }
            try removeOldest(&state)
        }
    }

    private func removeOldest(_ state: inout State) throws(WormholeError) {
        let path = path(of: state.tail)
        let size = fileSize(path)
        try PosixFiles.remove(path)
        state.bytes -= min(state.bytes, size)
        state.tail += 1
    }

    private func fileSize(_ path: FilePath) -> UInt64 {
        var info = stat()
        return lstat(path.string, &info) == 0 ? UInt64(info.st_size) : 0
    }

    private func modificationTime(_ path: FilePath) -> Double? {
        var info = stat()
        guard lstat(path.string, &info) == 0 else { return nil }
        return Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
    }

    /// The smallest "next sequence" of the named listeners, nil if there are none.
    func minimumCursor() throws(WormholeError) -> UInt64? {
        var result: UInt64?
        for name in try PosixFiles.listDirectory(cursors) {
            guard let value = QueueCursorFile.read(cursors.appending(name)) else { continue }
            result = min(result ?? value, value)
        }
        return result
    }

    /// Reads message `sequence`: nil if there is no such file.
    func read(_ sequence: UInt64) throws(WormholeError) -> Result<WormholeMessage, WormholeError>? {
        let path = path(of: sequence)
        let bytes: Data
        // A message that cannot be read here is moved aside and reported, and the reader goes on:
        // retrying it on every announcement would hold every later message behind it.
        switch try PosixFiles.readMessage(path, limit: configuration.maxPayloadBytes + Envelope.maxHeaderBytes + 8) {
        case .missing: return nil
        case .bytes(let data): bytes = data
        case .tooLarge(let size):
            let moved = try layout.quarantine(path, identifier: identifier)
            return .failure(WormholeError(.corruptMessage,
                "queue message \(sequence) of '\(identifier)' is \(size) bytes, over this reader's limit of \(configuration.maxPayloadBytes) payload bytes; moved to \(moved)",
                quarantinedPath: moved.string))
        case .unusable(let what):
            let moved = try layout.quarantine(path, identifier: identifier)
            return .failure(WormholeError(.corruptMessage,
                "queue message \(sequence) of '\(identifier)' is \(what), not a message file; moved to \(moved)",
                quarantinedPath: moved.string))
        }
        switch Envelope.decode(bytes) {
        case .success(let envelope):
            return .success(WormholeMessage(identifier: identifier, envelope: envelope, sequence: sequence))
        case .failure(let fault):
            let moved = try layout.quarantine(path, identifier: identifier)
            return .failure(WormholeError(.corruptMessage,
                "queue message \(sequence) of '\(identifier)' is damaged (\(fault.reason)); moved to \(moved)",
                quarantinedPath: moved.string))
        }
    }

    /// The newest message, for `read` on a queue.
    func latest() throws(WormholeError) -> WormholeMessage? {
        let state = try currentState()
        var sequence = state.head
        while sequence > state.tail {
            sequence -= 1
            if let result = try read(sequence) { return try result.get() }
        }
        return nil
    }

    /// Removes every message. A listener that had not read them gets `.messagesLost`, as for
    /// any removal of unread messages.
    func clear() throws(WormholeError) {
        let lock = try lock(exclusive: true)
        defer { lock.unlock() }
        var state = try readState(lock)
        while state.tail < state.head { try removeOldest(&state) }
        state.bytes = 0
        try writeState(state, lock)
    }
}

/// A queue message's file while it is written: unnamed (`O_TMPFILE`) where the file system and
/// /proc allow, so a writer that dies before linking it leaves nothing behind, and linking it
/// under its sequence is one `linkat`; else a `.tmp-…` file, linked, then unlinked.
final class MessageFile {
    private var fd: Int32?
    private let temp: FilePath?

    init(_ bytes: Data, in directory: FilePath, permissions: FilePermissions, sync: Bool) throws(WormholeError) {
        let fd = PosixFiles.canNameUnnamedFiles
            ? open(directory.string, PosixFiles.unnamedFile | O_RDWR | O_CLOEXEC, permissions.rawValue) : -1
        guard fd >= 0 else {
            let named = try PosixFiles.writeTemporary(bytes, in: directory, permissions: permissions, sync: sync)
            temp = named
            guard !sync else { self.fd = nil; return }
            // Unsynced: its committer syncs it later, through a descriptor.
            let reopened = open(named.string, O_RDONLY | O_CLOEXEC)
            guard reopened >= 0 else {
                let error = Errno(rawValue: errno)
                unlink(named.string)
                throw .io("open \(named)", error)
            }
            self.fd = reopened
            return
        }
        temp = nil
        do {
            try PosixFiles.setExactPermissions(FileDescriptor(rawValue: fd), permissions)
            _ = try bytes.withUnsafeBytes { try FileDescriptor(rawValue: fd).writeAll($0) }
            if sync, fsync(fd) != 0 { throw Errno(rawValue: errno) }
        } catch {
            close(fd)
            throw .io("write a message in \(directory)", error as? Errno ?? .ioError)
        }
        self.fd = fd
    }

    /// Links the file at `destination` unless something is there (false).
    func link(to destination: FilePath) throws(WormholeError) -> Bool {
        if let temp { return try PosixFiles.link(temp, to: destination) }
        guard let fd else { throw WormholeError(.unsupported, "message file already handed over") }
        if linkat(AT_FDCWD, "/proc/self/fd/\(fd)", AT_FDCWD, destination.string, AT_SYMLINK_FOLLOW) == 0 { return true }
        if errno == EEXIST { return false }
        throw .io("link \(destination)", Errno(rawValue: errno))
    }

    /// The open file, for the committer to sync and close (-1 if it was synced already).
    func release() -> Int32 {
        defer { fd = nil }
        return fd ?? -1
    }

    /// Removes the temporary name and closes what was not handed over.
    func discard() {
        if let temp { unlink(temp.string) }
        if let fd { close(fd) }
        fd = nil
    }
}

extension PosixFiles {
    /// `link(2)` without replacing: false if `destination` exists. `temp` stays.
    static func link(_ temp: FilePath, to destination: FilePath) throws(WormholeError) -> Bool {
        if Glibc.link(temp.string, destination.string) == 0 { return true }
        if errno == EEXIST { return false }
        throw .io("link \(destination)", Errno(rawValue: errno))
    }
}

/// A named listener's cursor: 8 bytes, written in place with one `pwrite`, which a process crash
/// cannot tear. Cleared cursors are moved forward by `clear`.
enum QueueCursorFile {
    /// A cursor's value; nil if absent or not a regular file (a FIFO there must not block a
    /// writer that holds the queue's lock).
    static func read(_ path: FilePath) -> UInt64? {
        let fd = open(path.string, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        return read(fd: fd)
    }

    static func read(fd: Int32) -> UInt64? {
        var value: UInt64 = 0
        guard pread(fd, &value, 8, 0) == 8 else { return nil }
        return UInt64(littleEndian: value)
    }

    static func write(fd: Int32, value: UInt64) -> Bool {
        var little = value.littleEndian
        return pwrite(fd, &little, 8, 0) == 8
    }
}

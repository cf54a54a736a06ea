#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import FoundationEssentials
import SystemPackage
import Synchronization

/// `queue` transiting: a lossless FIFO per identifier (docs/PROTOCOL.md, "Queues").
///
///     queues/<identifier>/.state             flock target; head, tail, bytes, generation (4 × UInt64 LE)
///     queues/<identifier>/<20-digit first>.seg  the messages of 256 sequences (QueueSegment.swift)
///     queues/<identifier>/<20-digit seq>     one message each, as versions before 0.11 wrote them: still read
///     queues/<identifier>/.cursors/<name>    a named listener's next sequence (UInt64 LE)
///
/// Writers append under the exclusive lock, so sequence numbers follow the order of passes and
/// each writer's messages stay in its order. A message is never changed once its entry is
/// written, only removed from the old end, so readers need no lock to read them.
struct MessageQueue: Sendable {
    let layout: Layout
    let identifier: String
    let configuration: WormholeConfiguration
    let directory: FilePath
    let statePath: FilePath
    let cursors: FilePath
    /// `directory` and a slash, as text: the paths of segments and messages are made from it
    /// (see `Layout`'s prefixes).
    private let prefix: String
    private let lastSegmentPath = SharedBox<(first: UInt64, path: FilePath)?>(nil)

    init(layout: Layout, identifier: String, configuration: WormholeConfiguration) {
        self.layout = layout
        self.identifier = identifier
        self.configuration = configuration
        prefix = layout.queuePrefix(identifier)
        directory = layout.queue(identifier)
        statePath = FilePath(prefix + ".state")
        cursors = FilePath(prefix + ".cursors")
    }

    func path(of sequence: UInt64) -> FilePath {
        let digits = String(sequence)
        return FilePath(prefix + String(repeating: "0", count: max(0, 20 - digits.count)) + digits)
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

    /// The path of the segment starting at `first`; the last one made is kept (a segment holds
    /// 256 messages, so passes in a row ask for the same one).
    func segmentPath(first: UInt64) -> FilePath {
        if let known = lastSegmentPath.withLock({ $0 }), known.first == first { return known.path }
        let path = FilePath(prefix + QueueSegment.name(first: first))
        lastSegmentPath.withLock { $0 = (first, path) }
        return path
    }

    /// Appends a message; returns its sequence number. Applies retention first.
    ///
    /// The message goes at the end of its segment (QueueSegment.swift), then its entry, then
    /// `.state` counts it. With `syncToDisk` and a `committer`, the segment is not synced here:
    /// it is handed to the committer, which syncs it once for every message of its round and then
    /// announces them (GroupCommit.swift). Without a committer it is synced before `.state`
    /// counts the message, and the caller announces.
    /// - Throws: `.queueFull` (policy `.reject`), `.diskFull`, `.io`.
    @discardableResult
    func append(_ envelope: Envelope, committer: GroupCommit? = nil) throws(WormholeError) -> UInt64 {
        let bytes = envelope.encoded()
        let lock = try lock(exclusive: true)
        defer { lock.unlock() }
        var state = try initializedState(lock)
        let open = SegmentCache()
        try applyRetention(&state, adding: UInt64(bytes.count), open)
        var sequence = state.head
        var segment = try writable(sequence, open)
        // A writer that died between writing an entry and saving the state left a complete
        // message: it is kept and counted, and this one goes after it.
        while case let slot = segment.slot(sequence), slot != .empty {
            if case .entry(let entry) = slot { state.bytes += UInt64(entry.length) }
            sequence += 1
            if QueueSegment.first(of: sequence) != open.first { segment = try writable(sequence, open) }
        }
        try segment.append(bytes, sequence: sequence)
        let grouped = configuration.syncToDisk && committer != nil
        if configuration.syncToDisk && !grouped, fdatasync(segment.fd) != 0 {
            throw .io("sync \(segment.path)", Errno(rawValue: errno))
        }
        state.head = sequence + 1
        state.bytes += UInt64(bytes.count)
        try writeState(state, lock)
        if grouped, let committer {
            try committer.add(segment.handOver(), key: segment.identity, identifier: identifier)
        }
        return sequence
    }

    /// The segment of `sequence`, opened (made if missing) to write. Something there that is not
    /// a regular file is moved to quarantine and a new segment made.
    private func writable(_ sequence: UInt64, _ cache: SegmentCache) throws(WormholeError) -> Segment {
        let path = segmentPath(first: QueueSegment.first(of: sequence))
        for _ in 0 ..< 2 {
            switch try segment(of: sequence, .create, cache) {
            case .segment(let segment):
                if segment.size < QueueSegment.indexSize { try? PosixFiles.setExactPermissions(FileDescriptor(rawValue: segment.fd), layout.filePermissions) }
                return segment
            case .unusable, .missing:
                _ = try layout.quarantine(path, identifier: identifier)
            }
        }
        throw WormholeError(.unsafeContainer, "\(path) is not a regular file after it was moved to quarantine; someone keeps making it")
    }

    private func applyRetention(_ state: inout State, adding size: UInt64, _ open: SegmentCache) throws(WormholeError) {
        let retention = configuration.queue
        // Read by every named listener: no longer needed.
        if let consumed = try minimumCursor() {
            while state.tail < min(consumed, state.head) { try removeOldest(&state, open) }
        }
        // Too old.
        let cutoff = Date().timeIntervalSince1970 - retention.maxAge
        while state.tail < state.head, tailPassedAt(state, open) ?? 0 < cutoff {
            try removeOldest(&state, open)
        }
        // Over the limits.
        while state.count + 1 > UInt64(retention.maxMessages) || state.bytes + size > UInt64(retention.maxBytes) {
            guard retention.overflow == .dropOldest, state.tail < state.head else {
                throw WormholeError(.queueFull,
                    "queue '\(identifier)' holds \(state.count) messages, \(state.bytes) bytes; adding \(size) bytes would pass its limit (\(retention.maxMessages) messages, \(retention.maxBytes) bytes); nothing was written")
            }
            try removeOldest(&state, open)
        }
    }

    /// The segment of `sequence` if there is one (nil: none, or not a regular file), kept open in
    /// `cache` for the next sequence.
    private func existing(_ sequence: UInt64, _ cache: SegmentCache) throws(WormholeError) -> Segment? {
        guard case .segment(let segment) = try segment(of: sequence, .write, cache) else { return nil }
        return segment
    }

    /// The segment of `sequence`: the one `cache` holds, or opened (and then held) with `access`.
    private func segment(of sequence: UInt64, _ access: QueueSegment.Access, _ cache: SegmentCache) throws(WormholeError) -> QueueSegment.Opened {
        let first = QueueSegment.first(of: sequence)
        if cache.first == first, let segment = cache.segment { return .segment(segment) }
        cache.drop()
        let opened = try QueueSegment.open(segmentPath(first: first), access, permissions: layout.filePermissions)
        if case .segment(let segment) = opened { (cache.first, cache.segment) = (first, segment) }
        return opened
    }

    /// Removes message `tail`: its entry is cleared (a message file of an older version is
    /// unlinked), and once the tail has passed a whole segment, the segment goes.
    private func removeOldest(_ state: inout State, _ open: SegmentCache) throws(WormholeError) {
        let sequence = state.tail
        var size: UInt64 = 0
        let segment = try? existing(sequence, open)
        if let segment, case let slot = segment.slot(sequence), slot != .empty {
            if case .entry(let entry) = slot { size = UInt64(entry.length) }
            if sequence != QueueSegment.last(of: sequence) { try segment.clear(sequence) }
        } else {
            let path = path(of: sequence)
            size = fileSize(path)
            try PosixFiles.remove(path)
        }
        state.bytes -= min(state.bytes, size)
        state.tail += 1
        if sequence == QueueSegment.last(of: sequence), let segment {
            try removeSegment(segment)
            open.drop()
        }
    }

    private func removeSegment(_ segment: Segment) throws(WormholeError) {
        try segment.clearIndex()
        try PosixFiles.remove(segment.path)
    }

    /// When message `sequence` was passed: its entry's time, or an older version's message
    /// file's mtime; nil if it has neither.
    private func passedAt(_ sequence: UInt64, _ open: SegmentCache) -> Double? {
        if let segment = try? existing(sequence, open), case .entry(let entry) = segment.slot(sequence) { return entry.seconds }
        return modificationTime(path(of: sequence))
    }

    /// The time of the queue's oldest message, as this process last read it: every pass checks
    /// it against the maximum age, and while the tail and generation are the same it is the same
    /// message (keyed by the queue's directory; a few dozen bytes per queue a process wrote).
    private static let tailTimes = Mutex<[String: (generation: UInt64, tail: UInt64, time: Double?)]>([:])

    private func tailPassedAt(_ state: State, _ open: SegmentCache) -> Double? {
        let key = directory.string
        if let known = MessageQueue.tailTimes.withLock({ $0[key] }), known.generation == state.generation, known.tail == state.tail {
            return known.time
        }
        let time = passedAt(state.tail, open)
        MessageQueue.tailTimes.withLock { $0[key] = (state.generation, state.tail, time) }
        return time
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

    /// Reads message `sequence`: nil if there is none. `cache` keeps the segment open for the
    /// next read; `drop()` it to look at the directory again.
    func read(_ sequence: UInt64, cache: SegmentCache = SegmentCache()) throws(WormholeError) -> Result<WormholeMessage, WormholeError>? {
        let segment: Segment
        switch try self.segment(of: sequence, .read, cache) {
        case .missing: return try readFile(sequence)
        case .segment(let opened): segment = opened
        case .unusable(let what):
            let first = QueueSegment.first(of: sequence)
            let moved = try layout.quarantine(segmentPath(first: first), identifier: identifier)
            return .failure(WormholeError(.corruptMessage,
                "queue segment \(QueueSegment.name(first: first)) of '\(identifier)' is \(what), not a segment file; moved to \(moved)",
                quarantinedPath: moved.string))
        }
        switch segment.slot(sequence) {
        case .empty: return try readFile(sequence)
        case .damaged:
            return .failure(WormholeError(.corruptMessage,
                "queue message \(sequence) of '\(identifier)': its entry in \(segment.path) is damaged; it is skipped"))
        case .entry(let entry) where Int(entry.length) > configuration.maxFileBytes:
            return .failure(WormholeError(.corruptMessage,
                "queue message \(sequence) of '\(identifier)' is \(entry.length) bytes, over this reader's limit of \(configuration.maxPayloadBytes) payload bytes; it is skipped"))
        case .entry(let entry):
            guard let bytes = segment.record(entry) else {
                return .failure(WormholeError(.corruptMessage,
                    "queue message \(sequence) of '\(identifier)' runs past the end of \(segment.path) (offset \(entry.offset), \(entry.length) bytes); it is skipped"))
            }
            switch Envelope.decode(bytes) {
            case .success(let envelope):
                return .success(WormholeMessage(identifier: identifier, envelope: envelope, sequence: sequence))
            case .failure(let fault):
                let kept = try layout.quarantine(copyOf: bytes, identifier: identifier, name: "\(sequence)")
                return .failure(WormholeError(.corruptMessage,
                    "queue message \(sequence) of '\(identifier)' is damaged (\(fault.reason)); a copy is in \(kept) and it is skipped",
                    quarantinedPath: kept.string))
            }
        }
    }

    /// Reads message `sequence` from its own file, as versions before segments wrote it.
    private func readFile(_ sequence: UInt64) throws(WormholeError) -> Result<WormholeMessage, WormholeError>? {
        let path = path(of: sequence)
        let bytes: Data
        // A message that cannot be read here is moved aside and reported, and the reader goes on:
        // retrying it on every announcement would hold every later message behind it.
        switch try PosixFiles.readMessage(path, limit: configuration.maxFileBytes) {
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
        let cache = SegmentCache()
        var sequence = state.head
        while sequence > state.tail {
            sequence -= 1
            if let result = try read(sequence, cache: cache) { return try result.get() }
        }
        return nil
    }

    /// Removes every message. A listener that had not read them gets `.messagesLost`, as for
    /// any removal of unread messages.
    func clear() throws(WormholeError) {
        let lock = try lock(exclusive: true)
        defer { lock.unlock() }
        var state = try readState(lock)
        for name in try PosixFiles.listDirectory(directory) where name.utf8.first.map({ $0 >= 0x30 && $0 <= 0x39 }) == true {
            let path = directory.appending(name)
            if name.hasSuffix(".seg"), case .segment(let segment) = try QueueSegment.open(path, .write, permissions: layout.filePermissions) {
                try removeSegment(segment)
            } else {
                try PosixFiles.remove(path)
            }
        }
        state.tail = state.head
        state.bytes = 0
        try writeState(state, lock)
    }
}

/// A named listener's cursor: 8 bytes, written in place with one `pwrite`, which a process crash
/// cannot tear. Cleared cursors are moved forward by `clear`.
enum QueueCursorFile {
    /// A cursor's value; nil if absent or not a regular file (a FIFO there must not block a
    /// writer that holds the queue's lock).
    static func read(_ path: FilePath) -> UInt64? {
        let fd = PosixFiles.openQuietly(path.string, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        guard let info = FileStatus(fd), info.isRegular else { return nil }
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

/// A value the copies of a struct share, behind a lock.
final class SharedBox<Value: Sendable>: Sendable {
    private let value: Mutex<Value>
    init(_ value: Value) { self.value = Mutex(value) }
    func withLock<Result: Sendable>(_ body: (inout Value) -> Result) -> Result { value.withLock { body(&$0) } }
}

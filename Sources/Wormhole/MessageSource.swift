#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import FoundationEssentials
import SystemPackage

/// What one listener reads next. `next()` returns the next undelivered message (or an error to
/// report), nil when caught up; `commit()` records that the last one was handled.
/// Used from one thread at a time (the listener's serial queue, or one async iterator).
protocol MessageSource: AnyObject {
    /// Whether one announcement may stand for several messages (a queue), so a drain reads until
    /// `next()` is nil. A latest-message source has at most one new message per read, and a pass
    /// made after the read announces itself again, so one read per announcement is enough.
    var readsUntilEmpty: Bool { get }
    func next() -> Result<WormholeMessage, WormholeError>?
    func commit()
    func close()
}

/// `file` / `coordinated`: the latest message, delivered once per pass. Several passes may be
/// announced before the listener reads; it reads the file once and then sees the same message
/// id, so a message never fires twice (MMWormhole fires again for each announcement).
final class LatestMessageSource: MessageSource {
    private let files: MessageFiles
    private let identifier: String
    private var lastDelivered: String?

    var readsUntilEmpty: Bool { false }

    init(files: MessageFiles, identifier: String) {
        self.files = files
        self.identifier = identifier
        // Listen for new passes only, as MMWormhole does: the current message is not replayed.
        lastDelivered = (try? files.read(identifier))??.messageID
    }

    func next() -> Result<WormholeMessage, WormholeError>? {
        do {
            guard let message = try files.read(identifier), message.messageID != lastDelivered else { return nil }
            lastDelivered = message.messageID
            return .success(message)
        } catch {
            return .failure(error)
        }
    }

    func commit() {}
    func close() {}
}

/// `queue`: every message in order from a cursor. A named listener's cursor is a file, locked
/// for as long as it listens (one process per name), and advanced after each message is
/// handled: after a crash only the message being handled comes again (at-least-once).
/// An unnamed listener starts at the end of the queue and keeps its cursor in memory.
final class QueueSource: MessageSource {
    private let queue: MessageQueue
    private let listenerName: String?
    private var nextSequence: UInt64
    private var pending: UInt64?
    private var cursorFD: Int32?
    /// A damaged cursor found when attaching, said by the next `next()` before any message.
    private var cursorFault: WormholeError?
    /// The queue this source reads: its generation, and its state file held open, whose link
    /// count drops to 0 when someone removes the queue (`rm -rf queues/<id>`) under us.
    private var generation: UInt64
    private var stateFD: Int32
    /// The segment read last, open for the next message.
    private let segments = SegmentCache()
    var readsUntilEmpty: Bool { true }

    init(queue: MessageQueue, listenerName: String?) throws(WormholeError) {
        self.queue = queue
        self.listenerName = listenerName
        if let listenerName { try Names.validateListenerName(listenerName) }
        let state = try queue.prepareState()
        generation = state.generation
        stateFD = try PosixFiles.openControlFile(queue.statePath, create: false, permissions: queue.layout.filePermissions).rawValue
        nextSequence = state.head
        guard listenerName != nil else { cursorFD = nil; return }
        do {
            let (fd, saved) = try attachCursor(state)
            cursorFD = fd
            nextSequence = saved
        } catch {
            Glibc.close(stateFD)
            throw error
        }
    }

    /// Opens and locks this listener's cursor file (one process per name) and returns it with
    /// its value; a new cursor starts at the queue's tail (everything still kept). The group may
    /// write in `.cursors/`, so a cursor is believed only if it is exactly 8 bytes inside
    /// [tail, head]; otherwise it is reported (`cursorFault`) and started again at the tail.
    private func attachCursor(_ state: MessageQueue.State) throws(WormholeError) -> (Int32, UInt64) {
        guard let listenerName else { throw WormholeError(.unsupported, "an unnamed listener has no cursor") }
        let path = queue.cursors.appending(listenerName)
        let fd: Int32
        do {
            fd = try PosixFiles.openControlFile(path, create: true, permissions: queue.layout.filePermissions).rawValue
        } catch {
            // Not ours to open (another member's 0644 file), or not a file at all: `.cursors/` is
            // not sticky, so it is moved aside and made anew.
            guard error.code == .unsafeContainer || error.underlying == .errno(.permissionDenied)
                || error.underlying == .errno(.isDirectory) else { throw error }
            try moveAside(path, listenerName)
            fd = try PosixFiles.openControlFile(path, create: true, permissions: queue.layout.filePermissions).rawValue
            cursorFault = WormholeError(.damagedCursor,
                "the cursor of listener '\(listenerName)' of '\(queue.identifier)' could not be opened (\(error)); it was moved aside and this listener resumes at the oldest message kept (\(state.tail)): messages may come again")
        }
        try? PosixFiles.setExactPermissions(FileDescriptor(rawValue: fd), queue.layout.filePermissions)
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let error = errno
            Glibc.close(fd)
            if error == EWOULDBLOCK {
                throw WormholeError(.listenerBusy, "listener '\(listenerName)' of '\(queue.identifier)' is already listening in another process or wormhole")
            }
            throw .io("flock \(path)", Errno(rawValue: error))
        }
        let size = FileStatus(fd)?.size ?? -1 // no time stamps asked for (FileStatus)
        if size == 8, let saved = QueueCursorFile.read(fd: fd) {
            if saved <= state.head { return (fd, saved) } // below the tail: next() reports the lost range
            cursorFault = WormholeError(.damagedCursor,
                "the cursor of listener '\(listenerName)' of '\(queue.identifier)' was \(saved), past the queue's end (\(state.head)): someone changed it; this listener resumes at the oldest message kept (\(state.tail)): messages may come again")
        } else if size != 0 {
            cursorFault = WormholeError(.damagedCursor,
                "the cursor of listener '\(listenerName)' of '\(queue.identifier)' was \(size) bytes, not 8: someone changed it; this listener resumes at the oldest message kept (\(state.tail)): messages may come again")
        }
        guard ftruncate(fd, 8) == 0, QueueCursorFile.write(fd: fd, value: state.tail) else {
            let error = errno
            Glibc.close(fd)
            throw .io("write cursor \(path)", Errno(rawValue: error))
        }
        return (fd, state.tail)
    }

    /// Renames an unusable cursor to `.cursors/.damaged.<name>.<64 random bits>` (names starting
    /// with a dot are not cursors; nobody can guess the name to have something there first).
    private func moveAside(_ path: FilePath, _ name: String) throws(WormholeError) {
        let aside = queue.cursors.appending(".damaged.\(name).\(String(UInt64.random(in: 0 ... .max), radix: 36))")
        guard Glibc.rename(path.string, aside.string) == 0 else { throw .io("move aside \(path)", Errno(rawValue: errno)) }
    }

    /// Whether the queue we read was removed (and maybe made again) since we attached.
    private var queueWasRemoved: Bool {
        // No time stamps asked for (FileStatus): the writers' next write of `.state` would dirty its inode.
        FileStatus(stateFD).map { $0.links == 0 } ?? false
    }

    /// The queue was removed under us: attach to the new one (made if needed), from its oldest
    /// message, and say what happened. The old queue's unread messages went with it; nothing of
    /// the new one is skipped.
    private func reattach() -> Result<WormholeMessage, WormholeError> {
        do {
            let state = try queue.prepareState()
            let fd = try PosixFiles.openControlFile(queue.statePath, create: false, permissions: queue.layout.filePermissions).rawValue
            Glibc.close(stateFD)
            stateFD = fd
            generation = state.generation
            var resume = state.tail
            if listenerName != nil {
                if let cursorFD { Glibc.close(cursorFD) }
                cursorFD = nil
                let (cursor, saved) = try attachCursor(state)
                cursorFD = cursor
                resume = max(saved, state.tail)
            }
            nextSequence = resume
            pending = nil
            segments.drop()
            return .failure(WormholeError(.messagesLost,
                "queue '\(queue.identifier)' was removed and made again while this listener ran: messages of the old queue it had not read are lost; continuing with the new queue at message \(resume)"))
        } catch {
            return .failure(error)
        }
    }

    func next() -> Result<WormholeMessage, WormholeError>? {
        if let fault = cursorFault {
            cursorFault = nil
            return .failure(fault)
        }
        if queueWasRemoved { return reattach() }
        do throws(WormholeError) {
            if let result = try queue.read(nextSequence, cache: segments) {
                pending = nextSequence + 1
                return result
            }
            // No message: caught up, or removed by retention before this listener read it.
            // Writers write entries and move head under the exclusive lock, so look again under
            // the shared lock, with the segment opened again (a segment made since the first
            // look, or made anew after `clear`): a message written since is visible then.
            let lock = try queue.lock(exclusive: false)
            let state: MessageQueue.State
            do throws(WormholeError) { state = try queue.readState(lock) } catch { lock.unlock(); throw error }
            if state.generation != 0 && state.generation != generation {
                lock.unlock() // reattach takes the new queue's lock exclusively
                return reattach()
            }
            defer { lock.unlock() }
            if nextSequence >= state.head { return nil }
            segments.drop()
            if let result = try queue.read(nextSequence, cache: segments) {
                pending = nextSequence + 1
                return result
            }
            let first = nextSequence
            // Below the tail: removed by retention. Inside the kept range: removed by a writer
            // that died while applying retention.
            let resumeAt = nextSequence < state.tail ? state.tail : nextSequence + 1
            pending = resumeAt
            return .failure(WormholeError(.messagesLost,
                "queue '\(queue.identifier)': messages \(first)…\(resumeAt - 1) were removed before this listener read them (\(resumeAt - first) lost)"))
        } catch {
            return .failure(error)
        }
    }

    func commit() {
        guard let pending else { return }
        nextSequence = pending
        self.pending = nil
        if let cursorFD { _ = QueueCursorFile.write(fd: cursorFD, value: nextSequence) }
    }

    func close() {
        segments.drop()
        if let cursorFD { Glibc.close(cursorFD) }
        cursorFD = nil
        if stateFD >= 0 { Glibc.close(stateFD) }
        stateFD = -1
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Foundation
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
    private var nextSequence: UInt64
    private var pending: UInt64?
    private let cursorFD: Int32?
    var readsUntilEmpty: Bool { true }

    init(queue: MessageQueue, listenerName: String?) throws(WormholeError) {
        self.queue = queue
        try queue.prepare()
        let state = try queue.currentState()
        guard let listenerName else {
            nextSequence = state.head
            cursorFD = nil
            return
        }
        try Names.validateListenerName(listenerName)
        let path = queue.cursors.appending(listenerName)
        let fd = open(path.string, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, queue.layout.filePermissions.rawValue)
        guard fd >= 0 else { throw .io("open cursor \(path)", Errno(rawValue: errno)) }
        try? PosixFiles.setExactPermissions(FileDescriptor(rawValue: fd), queue.layout.filePermissions)
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let error = errno
            Glibc.close(fd)
            if error == EWOULDBLOCK {
                throw WormholeError(.listenerBusy, "listener '\(listenerName)' of '\(queue.identifier)' is already listening in another process or wormhole")
            }
            throw .io("flock \(path)", Errno(rawValue: error))
        }
        cursorFD = fd
        if let saved = QueueCursorFile.read(fd: fd) {
            nextSequence = saved
        } else {
            // A new named listener receives everything still kept.
            nextSequence = state.tail
            guard QueueCursorFile.write(fd: fd, value: nextSequence) else {
                Glibc.close(fd)
                throw .io("write cursor \(path)", Errno(rawValue: errno))
            }
        }
    }

    func next() -> Result<WormholeMessage, WormholeError>? {
        do {
            if let result = try queue.read(nextSequence) {
                pending = nextSequence + 1
                return result
            }
            // No file: caught up, or removed by retention before this listener read it. Writers
            // link files and move head under the exclusive lock, so look again under the shared
            // lock: a file linked since the first look is visible then.
            let lock = try queue.lock(exclusive: false)
            defer { lock.unlock() }
            let state = try queue.readState(lock)
            if nextSequence >= state.head { return nil }
            if let result = try queue.read(nextSequence) {
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
        if let cursorFD { Glibc.close(cursorFD) }
    }
}

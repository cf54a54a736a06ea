// GroupCommit.swift: `queue` transiting on disk syncs its messages in groups, and announces them
// only once they are synced.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Dispatch
import Synchronization
import SystemPackage

/// A synced queue pass used to cost one fsync of its own before it returned (2,500 messages/s on
/// this project's disk). Now a pass appends its message whole to its segment, with its entry,
/// counted in `.state` (so a crash of the writer loses nothing it returned from), hands the open
/// segment to this committer, and returns. The committer, on its own serial queue, takes every
/// segment handed over since its last round, `fdatasync`s each once (however many messages went
/// into it), and then announces each identifier once. So a listener is told of a message only
/// once its bytes are on the disk, and the writer goes on writing while the disk syncs. Several
/// segments of a round (several queues) are synced by up to `ParallelSync.width` threads at once:
/// on ext4 without a journal, as this project's VM disk is, each sync is its own device flush,
/// and the block layer merges concurrent ones (6,000-7,300 files/s one after another,
/// 22,000-24,000 with 8 threads; BENCHMARKS.md). Under load a round first gathers passes for a
/// moment (`gatherWait`), so a flood makes fewer, larger rounds.
///
/// A sync or announcement that fails is kept and thrown by the next `pass` or `flush`: the pass
/// that wrote the message had already returned. `flush()` waits for every pass made so far; a
/// process that exits runs a last round (`atexit`), so a tool's last pass is announced too.
final class GroupCommit: Sendable {
    private struct Pending {
        /// Open files to sync, one per key (a segment's device and inode): several passes into one segment
        /// make one sync.
        var files: [String: Int32] = [:]
        var identifiers: [String] = []
        var scheduled = false
        var failure: WormholeError?
        var passes = 0
    }

    private let pending = Mutex(Pending())
    private let queue = DispatchQueue(label: "Wormhole.commit")
    private let announce: @Sendable (String) throws(WormholeError) -> Void

    init(announce: @escaping @Sendable (String) throws(WormholeError) -> Void) {
        self.announce = announce
        GroupCommit.registry.withLock { live in
            if !live.registered {
                live.registered = true
                atexit { if !ForkedChild.isChild { GroupCommit.flushAll() } } // a child's exit: ForkedChild.swift
            }
            live.committers.append(Weak(self))
            live.committers.removeAll { $0.value == nil }
        }
    }

    /// A message appended under `identifier` to the file `key`, open as `fd` (now the
    /// committer's): synced, closed and announced by the next round. A file already handed over
    /// for this round is synced once; the extra descriptor is closed. Throws the failure of an
    /// earlier round, if any.
    func add(_ fd: Int32, key: String, identifier: String) throws(WormholeError) {
        let (schedule, failure, extra) = pending.withLock { p -> (Bool, WormholeError?, Int32?) in
            var extra: Int32?
            if p.files[key] == nil { p.files[key] = fd } else { extra = fd }
            p.passes += 1
            if !p.identifiers.contains(identifier) { p.identifiers.append(identifier) }
            let failure = p.failure
            p.failure = nil
            defer { p.scheduled = true }
            return (!p.scheduled, failure, extra)
        }
        if let extra { close(extra) }
        if schedule { queue.async { self.round() } }
        if let failure { throw failure }
    }

    /// Waits until every message added so far is synced and announced; throws what failed.
    func flush() throws(WormholeError) {
        queue.sync { round(gathering: false) }
        if let failure = pending.withLock({ p -> WormholeError? in defer { p.failure = nil }; return p.failure }) {
            throw failure
        }
    }

    /// How long a round waits to gather passes when the last round carried two or more (a writer
    /// passing faster than the disk syncs), in µs, unless `gatherEnough` passes wait already. A
    /// round after a lone pass does not wait. Gathering makes fewer, larger rounds: fewer syncs,
    /// announcements and wake-ups. A flood of 1 KiB messages on this project's disk went from
    /// 12,400-13,200 to 19,900-21,000 msg/s with 500 µs (300 µs: 18,400-19,300; 1 ms: 22,000-23,000;
    /// BENCHMARKS.md "Issue 36: queue segments"); a message passed under such load waits for
    /// the round before it anyway.
    static let gatherWait: UInt32 = 500
    static let gatherEnough = 64

    /// Passes the last round carried; used only on `queue`.
    private nonisolated(unsafe) var lastPasses = 0

    /// On `queue`: syncs and closes what was handed over, then announces; `flush` and the last
    /// round at exit do not gather.
    private func round(gathering: Bool = true) {
        if gathering, lastPasses >= 2 {
            var waited: UInt32 = 0
            while waited < GroupCommit.gatherWait, pending.withLock({ $0.passes }) < GroupCommit.gatherEnough {
                usleep(100)
                waited += 100
            }
        }
        let batch = pending.withLock { p -> Pending in
            let batch = p
            p.files = [:]
            p.identifiers = []
            p.scheduled = false
            p.passes = 0
            return batch
        }
        lastPasses = batch.passes
        var failure: WormholeError? = ParallelSync.syncAndClose(Array(batch.files.values)).map {
            .io("sync a queue message (its pass had returned; it is kept, and announced)", Errno(rawValue: $0))
        }
        for identifier in batch.identifiers {
            do { try announce(identifier) } catch { if failure == nil { failure = error } }
        }
        if let failure { pending.withLock { p in if p.failure == nil { p.failure = failure } } }
    }

    private struct Weak: @unchecked Sendable {
        weak var value: GroupCommit?
        init(_ value: GroupCommit) { self.value = value }
    }

    private struct Registry {
        var registered = false
        var committers: [Weak] = []
    }

    private static let registry = Mutex(Registry())

    /// At exit: a last round for every committer still alive.
    private static func flushAll() {
        let live = registry.withLock { $0.committers.compactMap(\.value) }
        for committer in live { committer.queue.sync { committer.round(gathering: false) } }
    }
}

/// `fdatasync` and `close` of many files, by up to `width` threads at once (this one and helpers
/// made for the round: a round is rare next to the syncs it holds, and no thread idles between
/// rounds or crosses a fork). Returns the errno of the first sync that failed, if any.
enum ParallelSync {
    static let width = 8

    /// glibc's `sync_file_range`, which Swift's Glibc module does not declare; nil without it.
    static let syncFileRange: (@convention(c) (Int32, off_t, off_t, UInt32) -> Int32)? =
        dlsym(nil, "sync_file_range").map { unsafeBitCast($0, to: (@convention(c) (Int32, off_t, off_t, UInt32) -> Int32).self) }

    private final class Job: Sendable {
        let fds: [Int32]
        let next = Atomic<Int>(0)
        let failure = Mutex<Int32?>(nil)
        init(_ fds: [Int32]) { self.fds = fds }

        func work() {
            while true {
                let i = next.add(1, ordering: .relaxed).oldValue
                guard i < fds.count else { return }
                if fdatasync(fds[i]) != 0 {
                    let e = errno
                    failure.withLock { f in if f == nil { f = e } }
                }
                close(fds[i])
            }
        }
    }

    static func syncAndClose(_ fds: [Int32]) -> Int32? {
        if fds.isEmpty { return nil } // a round with only announcements (a flush, the last round at exit)
        // Every file's data is handed to the disk first, at once (`SYNC_FILE_RANGE_WRITE`, which
        // does not wait), so the block layer sees the round's writes together and can merge
        // neighbours; the syncs then wait for them and write what reading them needs.
        if let startWriting = syncFileRange { for fd in fds { _ = startWriting(fd, 0, 0, 2) } }
        let job = Job(fds)
        var helpers: [pthread_t] = []
        for _ in 0 ..< min(fds.count - 1, width - 1) {
            var thread = pthread_t()
            let context = Unmanaged.passRetained(job).toOpaque()
            guard pthread_create(&thread, nil, { context in
                Unmanaged<Job>.fromOpaque(context!).takeRetainedValue().work()
                return nil
            }, context) == 0 else {
                Unmanaged<Job>.fromOpaque(context).release() // no thread: this one does its share
                break
            }
            helpers.append(thread)
        }
        job.work()
        for thread in helpers { pthread_join(thread, nil) }
        return job.failure.withLock { $0 }
    }
}

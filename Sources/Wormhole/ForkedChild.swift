// ForkedChild.swift: a process forked from one that used a wormhole, until it execs: it writes
// and listens no more, and its exit leaves its parent's work alone.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import DarwinNotify
import Synchronization

/// A child after `fork()` has its parent's memory but only the thread that forked: a lock another
/// thread held stays held (a Swift `Mutex` then traps), the threads of the group commit and of
/// the delivery queues are not there (a commit round its parent had scheduled never runs in the
/// child), and the notification center returns `NOTIFY_STATUS_OPT_DISABLE` until exec, as on
/// macOS. So in such a child every call of a wormhole that would write, wait or listen throws
/// `.notification` with `optionDisabled` before touching any of it, and nothing is written;
/// reading a message still works. The exit-time work (the last group commit, removing spares'
/// names) is the parent's and is left to it: a child that ran it, forked while a commit round was
/// pending, waited for ever at `exit`.
enum ForkedChild {
    private static let forked = Atomic<Bool>(false)

    /// Installed by a process's first wormhole: a fork before it leaves nothing of ours behind.
    static let installed: Void = {
        _ = forked.load(ordering: .relaxed) // made before any fork can run the handler
        pthread_atfork(nil, nil) { ForkedChild.forked.store(true, ordering: .relaxed) }
    }()

    /// Whether this process was forked from one that had a wormhole, and has not exec'd since.
    static var isChild: Bool { forked.load(ordering: .relaxed) }

    /// Throws in such a child; `what` is what was refused.
    static func refuse(_ what: String) throws(WormholeError) {
        guard isChild else { return }
        throw WormholeError.notification(
            NotifyError(code: .optionDisabled, message: "this process was forked from one that used a wormhole; until it execs its wormholes neither write nor listen"),
            "\(what) refused, nothing was written")
    }
}

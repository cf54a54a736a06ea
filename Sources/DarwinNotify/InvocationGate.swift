// InvocationGate.swift: the one cancel contract of every API that hops to a queue.
#if canImport(Glibc)
import Glibc
#endif

/// Makes `cancel()` final for closures that run on a queue the caller chose
/// (`NotifyCenter.observe(_:queue:handler:)`, `NotifyCenter.dispatchToken(_:queue:handler:)`,
/// Wormhole listeners): once `close()` returns, no closure starts, and none is running on another
/// thread. One running on the closing thread (a handler that cancels its own registration) is
/// not waited for: it would wait for itself.
///
/// A pthread mutex and condition, not `Mutex`: `close()` must sleep until runners leave.
package final class InvocationGate: Sendable {
    // nonisolated(unsafe): the pointers never change after init, and what they point to is
    // used only through pthread calls, which make it thread-safe.
    private nonisolated(unsafe) let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private nonisolated(unsafe) let idle = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    // nonisolated(unsafe): read and written only with `mutex` held.
    private nonisolated(unsafe) var closed = false
    private nonisolated(unsafe) var runners: [pthread_t] = []

    package init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(idle, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        pthread_cond_destroy(idle)
        mutex.deallocate()
        idle.deallocate()
    }

    /// Runs `body` unless the gate is closed; `close()` on another thread waits for it.
    package func run(_ body: () -> Void) {
        pthread_mutex_lock(mutex)
        guard !closed else { pthread_mutex_unlock(mutex); return }
        runners.append(pthread_self())
        pthread_mutex_unlock(mutex)
        body()
        pthread_mutex_lock(mutex)
        if let i = runners.firstIndex(where: { pthread_equal($0, pthread_self()) != 0 }) { runners.remove(at: i) }
        pthread_cond_broadcast(idle)
        pthread_mutex_unlock(mutex)
    }

    /// Whether a closure of this gate is running on the calling thread.
    package var isRunningHere: Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return runners.contains { pthread_equal($0, pthread_self()) != 0 }
    }

    /// Closes the gate and waits out closures running on other threads.
    package func close() {
        pthread_mutex_lock(mutex)
        closed = true
        while runners.contains(where: { pthread_equal($0, pthread_self()) == 0 }) {
            pthread_cond_wait(idle, mutex)
        }
        pthread_mutex_unlock(mutex)
    }
}

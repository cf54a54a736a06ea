// DeliveryExecutor.swift: a task executor on the thread that delivers a post, so that a task
// awaiting a post resumes where the post arrived: no thread wake-up beyond the one a C callback
// pays (issue 23).
import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// Runs the jobs a delivery makes ready on the delivery's own thread, right after it.
///
/// A delivery (the closure the C core calls for a post) yields to an `AsyncStream`, which makes
/// the task awaiting it ready and hands that task's job to the task's executor: with this one
/// preferred (`withTaskExecutorPreference(center.deliveryExecutor)`), the job is kept and run by
/// the delivery before it returns, on the same thread (the center's delivery thread; for a
/// `self.` name, the posting thread, unless that thread runs a task). A job enqueued anywhere
/// else (the task's first start, a wake-up by something other than a post) runs on a global
/// dispatch thread, as the default executor would run it.
///
/// The task then runs on the delivery thread until its next suspension, like a handler observed
/// with `queue: nil`: keep that short, and never wait there for another delivery of the center.
public final class DeliveryExecutor: TaskExecutor, Sendable {
    init() {}

    /// The jobs one delivery made ready, on its thread's stack of deliveries (thread-specific).
    private final class Collector {
        let owner: ObjectIdentifier
        var jobs: [UnownedJob] = []
        init(owner: ObjectIdentifier) { self.owner = owner }
    }

    /// The innermost delivery running on this thread, or nil.
    private static let collectorKey: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "pthread_key_create failed")
        return key
    }()

    public func enqueue(_ job: consuming ExecutorJob) {
        let ready = UnownedJob(job)
        if let slot = pthread_getspecific(Self.collectorKey) {
            let collector = Unmanaged<Collector>.fromOpaque(slot).takeUnretainedValue()
            if collector.owner == ObjectIdentifier(self) {
                collector.jobs.append(ready) // run by that delivery, on this thread, before it returns
                return
            }
        }
        let executor = asUnownedTaskExecutor()
        DispatchQueue.global().async { ready.runSynchronously(on: executor) }
    }

    /// Runs `delivery` (which makes tasks ready), then, on this thread, every job it made ready
    /// and every job those make ready in turn.
    func run(_ delivery: () -> Void) {
        // A delivery made inside a task (a `self.` name posted from one) does not run another
        // task's job in the middle of it: those go to a global thread.
        guard withUnsafeCurrentTask(body: { $0 == nil }) else { return delivery() }
        let collector = Collector(owner: ObjectIdentifier(self))
        let outer = pthread_getspecific(Self.collectorKey)
        pthread_setspecific(Self.collectorKey, Unmanaged.passUnretained(collector).toOpaque())
        delivery()
        var next = 0
        while next < collector.jobs.count {
            let job = collector.jobs[next]
            next += 1
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
        pthread_setspecific(Self.collectorKey, outer)
        withExtendedLifetime(collector) {}
    }
}

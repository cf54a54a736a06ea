// Background thread: a named POSIX thread running one closure, for the bridge's long-lived
// loops (the MQTT network loop, the state watcher). Foundation's Thread would do, but the bridge
// links FoundationEssentials only (its package must stay small), which has none.
import Glibc

enum BackgroundThread {
    /// What a new thread is handed: its name and its work. Retained for the thread, which
    /// releases it.
    private final class Start: Sendable {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }

    /// Starts `body` on a new detached thread called `name` (at most 15 bytes show in ps and top).
    static func start(name: String, _ body: @escaping @Sendable () -> Void) {
        let start = Unmanaged.passRetained(Start(name: name, body: body)).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, run, start)
        // No thread, no bridge: the same as Foundation's Thread, which traps too.
        precondition(rc == 0, "pthread_create: \(String(cString: strerror(rc)))")
        pthread_detach(thread)
    }

    private static let run: @convention(c) (UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? = { raw in
        guard let raw else { return nil }
        let start = Unmanaged<Start>.fromOpaque(raw).takeRetainedValue()
        nameThisThread(start.name)
        start.body()
        return nil
    }

    /// What ps, top and gdb show for the calling thread. pthread_setname_np is not visible to
    /// Swift (glibc declares it under _GNU_SOURCE only), so through the file it writes itself.
    private static func nameThisThread(_ name: String) {
        let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return } // no /proc: the thread keeps the process's name
        defer { close(fd) }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }
}

import CNotify
import Dispatch

/// One event of a job started on a post (docs/PROTOCOL.md "Launch on post"): a name the job
/// declared was posted, `count` times (more than 1 when posts made while the job was not running
/// were coalesced, as notify(3) coalesces).
public struct LaunchEvent: Sendable, Hashable {
    /// The name posted.
    public let name: String
    /// How many posts of `name` this event stands for.
    public let count: Int
    /// The launcher's number of this event for the job: increasing from 1.
    public let serial: UInt64
}

/// Launch on post: darwin-notifyd's launcher starts a job when a name it declared in
/// darwin-notify-launch(5) is posted, as launchd starts a job on its `LaunchEvents`
/// (`com.apple.notifyd.matching`). The job checks in early in `main`, as it would with
/// `xpc_set_event_stream_handler("com.apple.notifyd.matching", queue, handler)`, and gets every
/// event since the launcher started it, then each live one: each once, in order.
public enum LaunchEvents {
    /// Checks in with the launcher and runs `handler` for each event, one at a time, on `queue`
    /// (nil: the library's thread that takes them).
    ///
    /// - Parameters:
    ///   - job: the declaration's label (its file name without `.conf`); nil: `$DARWIN_NOTIFY_JOB`,
    ///     which the launcher sets for a command it starts.
    ///   - bus: the launcher's bus; nil: `$DARWIN_NOTIFY_LAUNCHER_BUS`, else `$DBUS_STARTER_ADDRESS`,
    ///     else the system bus for root and the session bus for others.
    ///   - queue: where `handler` runs, one event at a time, in order; nil: on the library's thread
    ///     that takes the events, with no hop.
    ///   - handler: called once for each ``LaunchEvent``.
    /// - Throws: ``NotifyError`` with `.invalidName` when the launcher declares no such job,
    ///   `.notAuthorized` when this process is not the job, `.serverNotFound` when no launcher
    ///   answers, `.invalidRequest` on a second check-in (once per process).
    public static func checkIn(job: String? = nil, bus: String? = nil, queue: DispatchQueue? = nil,
                               handler: @escaping @Sendable (LaunchEvent) -> Void) throws(NotifyError) {
        let box = Unmanaged.passRetained(LaunchHandlerBox(queue: queue, handler: handler))
        let status = CNotify_launch_check_in(job, bus, { context, event in
            guard let context, let event else { return }
            let box = Unmanaged<LaunchHandlerBox>.fromOpaque(context).takeUnretainedValue()
            let value = LaunchEvent(name: String(cString: event.pointee.name), count: Int(event.pointee.count),
                                    serial: event.pointee.serial)
            if let queue = box.queue {
                let handler = box.handler
                queue.async { handler(value) }
            } else {
                box.handler(value)
            }
        }, box.toOpaque())
        if status != UInt32(NOTIFY_STATUS_OK) { box.release() }
        try NotifyError.check(status)
        // On success the box lives as long as the process: the check-in is never undone.
    }
}

private final class LaunchHandlerBox: Sendable {
    let queue: DispatchQueue?
    let handler: @Sendable (LaunchEvent) -> Void
    init(queue: DispatchQueue?, handler: @escaping @Sendable (LaunchEvent) -> Void) {
        self.queue = queue
        self.handler = handler
    }
}

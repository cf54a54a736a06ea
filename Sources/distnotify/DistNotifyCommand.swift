import ArgumentParser
import CNotify
import DarwinNotify
import FoundationEssentials
import Glibc

/// `distnotify`: distributed notifications (a name, an object, a userInfo) from the shell, on the
/// user's bus by default (as `DistributedNotificationCenter.default()`). The property-list work is
/// in PlistJSON.swift; this file maps arguments to the C core's distributed calls.
@main
struct DistNotifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "distnotify",
        abstract: "Post and watch distributed notifications (name, object, userInfo) between processes.",
        discussion: """
            The bus: --bus, else $DARWIN_NOTIFY_BUS, else the session bus ($DBUS_SESSION_BUS_ADDRESS), \
            else this user's embedded bus; --system for every user's (the system bus). A userInfo is a \
            JSON object; data and dates are written {"$data": "<base64>"} and {"$date": <seconds since 1970>}.
            """,
        version: "distnotify (DarwinNotify) \(darwinNotifyVersion)",
        subcommands: [Post.self, Watch.self]
    )
}

struct BusOptions: ParsableArguments {
    @Option(name: .long, help: "The bus: a D-Bus address, or session, system, embedded.")
    var bus: String?
    @Flag(name: .long, help: "Every user's scope: the system bus.")
    var system = false

    func center() throws -> OpaquePointer {
        let environment = ProcessInfo.processInfo.environment
        let chosen = bus ?? (system ? "system"
            : environment["DARWIN_NOTIFY_BUS"].flatMap { $0.isEmpty ? nil : $0 }
            ?? (environment["DBUS_SESSION_BUS_ADDRESS"].map { $0.isEmpty ? "embedded" : "session" } ?? "embedded"))
        var status: UInt32 = 0
        guard let center = CNotify_center_create(chosen, &status) else {
            throw Failure(description: "cannot use the bus \(chosen): \(String(cString: CNotify_last_error()))")
        }
        return center
    }
}

struct Post: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Post one distributed notification.")
    @OptionGroup var options: BusOptions
    @Argument(help: "The notification's name.") var name: String
    @Option(name: .long, help: "The object (a string).") var object: String?
    @Option(name: [.customLong("user-info"), .customShort("u")], help: "The userInfo, a JSON object.") var userInfo: String?
    @Flag(name: .long, help: "Deliver at once, even to observers that suspended delivery.") var deliverImmediately = false

    func run() throws {
        let info: OwnedPlist?
        do { info = try userInfo.map(PlistJSONReader.userInfo) } catch { throw ValidationError("--user-info: \(error)") }
        let center = try options.center()
        defer { CNotify_center_destroy(center) }
        let flags = deliverImmediately ? UInt32(CNOTIFY_DISTRIBUTED_DELIVER_IMMEDIATELY) : 0
        let status = CNotify_distributed_post(center, name, object, info?.pointer, flags)
        guard status == UInt32(NOTIFY_STATUS_OK) else {
            throw Failure(description: "not posted: \(String(cString: CNotify_last_error()))")
        }
        guard CNotify_center_flush(center, 5000) == UInt32(NOTIFY_STATUS_OK) else {
            throw Failure(description: "posted, but not written to the bus: \(String(cString: CNotify_last_error()))")
        }
    }
}

struct Watch: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print distributed notifications as they arrive (all names unless NAME is given).")
    @OptionGroup var options: BusOptions
    @Argument(help: "Only this name.") var name: String?
    @Option(name: .long, help: "Only notifications with this object.") var object: String?
    @Flag(name: .long, help: "One JSON object per line: name, object, userInfo, sender, sequence.") var json = false
    @Option(name: .long, help: "Exit after this many.") var count: Int?

    func run() throws {
        // A watcher runs until stopped: one started by a parent that blocks SIGTERM (blocked
        // signals survive exec) would not stop on `kill`. Unblocked before the center's thread exists.
        var stopping = sigset_t()
        sigemptyset(&stopping)
        for signal in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&stopping, signal) }
        pthread_sigmask(SIG_UNBLOCK, &stopping, nil)
        let center = try options.center()
        let printer = Printer(json: json, limit: count)
        let context = Unmanaged.passRetained(printer).toOpaque()
        var id: UInt64 = 0
        let status = CNotify_distributed_add_handler(center, name, object, { context, note in
            guard let context, let note else { return }
            Unmanaged<Printer>.fromOpaque(context).takeUnretainedValue().print(note.pointee)
        }, context, { Unmanaged<Printer>.fromOpaque($0!).release() }, &id)
        guard status == UInt32(NOTIFY_STATUS_OK) else {
            Unmanaged<Printer>.fromOpaque(context).release()
            throw Failure(description: "cannot watch: \(String(cString: CNotify_last_error()))")
        }
        // Scripts and tests wait for this line: from here on, every post is printed.
        StandardStreams.err("distnotify: watching\n")
        printer.waitUntilDone()
        var stats = CNotify_distributed_stats()
        CNotify_distributed_get_stats(center, &stats)
        if stats.dropped > 0 {
            StandardStreams.err("distnotify: \(stats.dropped) malformed notifications dropped\n")
        }
    }
}

/// A failure past the arguments (no bus, a refused post): exit status 1 and the sentence.
struct Failure: Error, CustomStringConvertible {
    let description: String
}

/// Prints each notification on the delivery thread; the main thread waits for the count.
final class Printer: @unchecked Sendable {
    // @unchecked Sendable: `printed` is guarded by `lock`; the rest is set in init.
    private let json: Bool
    private let limit: Int?
    private var printed = 0
    private var lock = pthread_mutex_t()
    private var done = pthread_cond_t()

    init(json: Bool, limit: Int?) {
        self.json = json
        self.limit = limit
        pthread_mutex_init(&lock, nil)
        pthread_cond_init(&done, nil)
    }

    func print(_ note: CNotify_distributed_note) {
        let name = String(cString: note.name)
        let object = note.object.map { String(cString: $0) }
        let line: String
        if json {
            let sender = note.sender.map { PlistJSONWriter.quoted(String(cString: $0)) } ?? "null"
            line = "{\"name\":\(PlistJSONWriter.quoted(name)),\"object\":\(object.map(PlistJSONWriter.quoted) ?? "null"),"
                + "\"userInfo\":\(PlistJSONWriter.json(note.user_info)),\"sender\":\(sender),\"sequence\":\(note.sequence),"
                + "\"deliverImmediately\":\(note.options & UInt32(CNOTIFY_DISTRIBUTED_DELIVER_IMMEDIATELY) != 0)}"
        } else {
            line = name + (object.map { " object=\($0)" } ?? "") + (note.user_info.map { " userInfo=\(PlistJSONWriter.json($0))" } ?? "")
        }
        pthread_mutex_lock(&lock)
        if limit.map({ printed < $0 }) ?? true {
            StandardStreams.out(line + "\n")
            printed += 1
            pthread_cond_broadcast(&done)
        }
        pthread_mutex_unlock(&lock)
    }

    func waitUntilDone() {
        pthread_mutex_lock(&lock)
        while limit.map({ printed < $0 }) ?? true { pthread_cond_wait(&done, &lock) }
        pthread_mutex_unlock(&lock)
    }
}


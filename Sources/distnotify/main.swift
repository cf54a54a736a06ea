// distnotify: distributed notifications (a name, an object, a userInfo) from the shell, on the
// user's bus by default (as `DistributedNotificationCenter.default()`). The property-list work is in
// PlistJSON.swift; this file reads the arguments and calls the C core. No Foundation and no
// argument-parsing library: this tool ships beside notifyutil, and Foundation would triple its size.
import CNotify
import DarwinNotify
import Glibc
import CommandLineSupport

let usage = """
    usage: distnotify post NAME [--object OBJECT] [--user-info JSON] [--deliver-immediately] [BUS]
           distnotify watch [NAME] [--object OBJECT] [--json] [--count N] [BUS]
           distnotify --help | --version

    Post and watch distributed notifications (a name, an object string and a property-list
    userInfo) between processes.

      post NAME              post one notification
        --object OBJECT      its object (a string)
        -u, --user-info JSON its userInfo, a JSON object; data and dates are written
                             {"$data": "<base64>"} and {"$date": <seconds since 1970>}
        --deliver-immediately  delivered at once, even to observers that suspended delivery
      watch [NAME]           print each notification as it arrives (every name without NAME);
                             "distnotify: watching" on stderr once registered
        --object OBJECT      only those with this object
        --json               one JSON object per line: name, object, userInfo, sender, sequence,
                             deliverImmediately
        --count N            exit after N

    BUS: --bus ADDRESS (a D-Bus address, or session, system, embedded) or --system (every user's:
    the system bus); else $DARWIN_NOTIFY_BUS, else the session bus ($DBUS_SESSION_BUS_ADDRESS),
    else this user's embedded bus. Exit status: 0, 1 when posting or watching failed, 64 for a
    usage error.
    """

/// A usage error: one line, as other Linux tools say it, and exit 64.
func usageError(_ text: String) -> Never {
    StandardStreams.err("distnotify: \(text); see distnotify --help\n")
    exit(64)
}

/// A failure past the arguments (no bus, a refused post): exit 1.
func failure(_ text: String) -> Never {
    StandardStreams.err("distnotify: \(text)\n")
    exit(1)
}

struct Arguments {
    var command = ""
    var name: String?
    var object: String?
    var userInfo: String?
    var deliverImmediately = false
    var json = false
    var count: Int?
    var bus: String?
    var system = false

    init(_ words: [String]) {
        var i = 0
        func value(_ option: String) -> String {
            i += 1
            guard i < words.count else { usageError("\(option) needs a value") }
            return words[i]
        }
        while i < words.count {
            let word = words[i]
            switch word {
            case "--object": object = value(word)
            case "-u", "--user-info": userInfo = value(word)
            case "--deliver-immediately": deliverImmediately = true
            case "--json": json = true
            case "--count":
                let text = value(word)
                guard let n = Int(text), n > 0 else { usageError("--count takes a positive number, not '\(text)'") }
                count = n
            case "--bus": bus = value(word)
            case "--system": system = true
            default:
                if word.hasPrefix("-") && word != "-" { usageError("unknown option '\(word)'") }
                if command.isEmpty { command = word }
                else if name == nil { name = word }
                else { usageError("one name only ('\(word)' is a second)") }
            }
            i += 1
        }
        guard command == "post" || command == "watch" else {
            usageError(command.isEmpty ? "no command given (post or watch)" : "unknown command '\(command)' (post or watch)")
        }
        if command == "post" {
            guard name != nil else { usageError("post needs a NAME") }
            if json || count != nil { usageError("--json and --count are for watch") }
        } else if userInfo != nil || deliverImmediately {
            usageError("--user-info and --deliver-immediately are for post")
        }
        if bus != nil && system { usageError("--bus and --system choose the same thing: give one") }
    }

    /// The center on the chosen bus.
    func center() -> NotifyCenter {
        func variable(_ name: String) -> String? { getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } }
        let chosen = bus ?? (system ? "system" : variable("DARWIN_NOTIFY_BUS") ?? (variable("DBUS_SESSION_BUS_ADDRESS") == nil ? "embedded" : "session"))
        do { return try NotifyCenter(bus: chosen) } catch {
            failure("cannot use the bus \(chosen): \(error.message)")
        }
    }
}

func post(_ arguments: Arguments) -> Never {
    let info: OwnedPlist?
    do { info = try arguments.userInfo.map(PlistJSONReader.userInfo) } catch { usageError("--user-info: \(error)") }
    let center = arguments.center()
    do {
        try center.postDistributed(arguments.name!, object: arguments.object, cUserInfo: info?.pointer,
                                   deliverImmediately: arguments.deliverImmediately)
    } catch {
        failure("not posted: \(error.message)")
    }
    do { try center.flush(timeoutMilliseconds: 5000) } catch {
        failure("posted, but not written to the bus: \(error.message)")
    }
    exit(0)
}

func watch(_ arguments: Arguments) -> Never {
    // A watcher runs until stopped: one started by a parent that blocks SIGTERM (blocked signals
    // survive exec) would not stop on `kill`. Unblocked before the center's thread exists.
    var stopping = sigset_t()
    sigemptyset(&stopping)
    for signal in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&stopping, signal) }
    pthread_sigmask(SIG_UNBLOCK, &stopping, nil)
    let center = arguments.center()
    let printer = Printer(json: arguments.json, limit: arguments.count)
    let observation: DistributedObservation
    do {
        observation = try center.observeDistributed(arguments.name, object: arguments.object) { note in printer.print(note) }
    } catch {
        failure("cannot watch: \(error.message)")
    }
    // Scripts and tests wait for this line: from here on, every post is printed.
    StandardStreams.err("distnotify: watching\n")
    withExtendedLifetime(observation) { printer.waitUntilDone() } // releasing the observation would cancel it
    var stats = CNotify_distributed_stats()
    CNotify_distributed_get_stats(center.cCenter, &stats)
    if stats.dropped > 0 { StandardStreams.err("distnotify: \(stats.dropped) malformed notifications dropped\n") }
    exit(0)
}

/// Prints each notification on the delivery thread; the main thread waits for the count.
final class Printer: @unchecked Sendable {
    // @unchecked Sendable: `printed` is guarded by `lock`; the rest is set in init.
    private let json: Bool
    private let limit: Int?
    private var printed = 0
    // Allocated, not stored properties passed with `&`: Swift does not promise a stored
    // property's address stays the same across accesses, and pthread objects must not move.
    private let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let done = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init(json: Bool, limit: Int?) {
        self.json = json
        self.limit = limit
        pthread_mutex_init(lock, nil)
        pthread_cond_init(done, nil)
    }

    deinit {
        pthread_cond_destroy(done)
        pthread_mutex_destroy(lock)
        done.deallocate()
        lock.deallocate()
    }

    /// On the center's delivery thread, inside the handler (where the note's userInfo lives).
    func print(_ note: DistributedNote) {
        let name = note.name, object = note.object
        let userInfo = note.withUnsafeNote { $0.pointee.user_info }
        let line: String
        if json {
            let sender = note.sender.map(JSONString.quoted) ?? "null"
            line = "{\"name\":\(JSONString.quoted(name)),\"object\":\(object.map(JSONString.quoted) ?? "null"),"
                + "\"userInfo\":\(PlistJSONWriter.json(userInfo)),\"sender\":\(sender),\"sequence\":\(note.sequence),"
                + "\"deliverImmediately\":\(note.deliverImmediately)}"
        } else {
            line = name + (object.map { " object=\($0)" } ?? "") + (userInfo.map { " userInfo=\(PlistJSONWriter.json($0))" } ?? "")
        }
        pthread_mutex_lock(lock)
        if limit.map({ printed < $0 }) ?? true {
            StandardStreams.out(line + "\n")
            printed += 1
            pthread_cond_broadcast(done)
        }
        pthread_mutex_unlock(lock)
    }

    func waitUntilDone() {
        pthread_mutex_lock(lock)
        while limit.map({ printed < $0 }) ?? true { pthread_cond_wait(done, lock) }
        pthread_mutex_unlock(lock)
    }
}

let words = Array(CommandLine.arguments.dropFirst())
if words.contains("--help") || words.contains("-h") {
    StandardStreams.out(usage + "\n")
    exit(0)
}
if words == ["--version"] {
    StandardStreams.out("distnotify (DarwinNotify) \(darwinNotifyVersion)\n")
    exit(0)
}
let arguments = Arguments(words)
if arguments.command == "post" { post(arguments) } else { watch(arguments) }

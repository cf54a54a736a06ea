// BusMonitor: `notifyutil --monitor [--json]`, every post on a bus, one line each, with who sent
// it. A connection of its own (raw libdbus: it must see posts of every name, ours and foreign),
// one catch-all match rule, and the sender's pid and uid from the bus
// (org.freedesktop.DBus.GetConnectionCredentials), cached per unique name for this connection.
// No Foundation: notifyutil starts in about a millisecond, and Foundation would double that.
import CDBus
import CNotify
import DarwinNotify
import CommandLineSupport

#if canImport(Glibc)
import Glibc
#endif

/// One post as `--monitor` reports it.
package struct MonitoredPost: Sendable, Equatable {
    package let time: Double
    package let name: String
    package let sender: String
    /// From the bus; nil when the sender had gone before it could be asked.
    package let pid: UInt32?
    package let uid: UInt32?
    package let sequence: UInt64?
    /// Posts missing from this sender's numbering of this name just before this one.
    package let gap: UInt64
    /// Posts of this name its poster held back and this copy stands for besides itself
    /// (docs/PROTOCOL.md "Bus copies, coalesced": the copy's count less one): not lost.
    package var coalesced: UInt64 = 0
    /// Posted by a DarwinNotify client (its bucket interface and a sequence), or by another
    /// D-Bus client (dbus-send, gdbus) on the plain interface.
    package let ours: Bool
    /// Why every DarwinNotify receiver drops this post; nil when receivers deliver it. "self" (a
    /// `self.` name never comes from the bus), "uid" (a `user.uid.N` name from a sender the bus
    /// says is neither N nor root, or gone before it could be asked and with no credential),
    /// "duplicate" (the number just seen again from its origin: the same post a second time) or
    /// "malformed" (not a Post a receiver reads: an empty or oversized name, a bad argument).
    package var rejected: String? = nil

    package init(time: Double, name: String, sender: String, pid: UInt32?, uid: UInt32?, sequence: UInt64?, gap: UInt64,
                coalesced: UInt64 = 0, ours: Bool, rejected: String? = nil) {
        self.coalesced = coalesced
        self.time = time
        self.name = name
        self.sender = sender
        self.pid = pid
        self.uid = uid
        self.sequence = sequence
        self.gap = gap
        self.ours = ours
        self.rejected = rejected
    }

    /// `name` for a terminal: any other process chooses it, so control characters (C0, DEL, C1)
    /// and the backslash are written `\xHH` and cannot move the cursor, clear the screen or
    /// forge a line.
    package static func printable(_ name: String) -> String {
        // The common case (nothing to escape) costs one pass over the bytes.
        if !name.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == 0x5C || $0 == 0xC2 }) { return name }
        var out = ""
        for scalar in name.unicodeScalars {
            switch scalar.value {
            case 0x00 ..< 0x20, 0x7F ... 0x9F, 0x5C:
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\x" + (hex.count < 2 ? "0" : "") + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// Seconds since 1970 with six decimals.
    var when: String {
        let micros = UInt64((time * 1_000_000).rounded())
        let fraction = String(micros % 1_000_000)
        return "\(micros / 1_000_000)." + String(repeating: "0", count: 6 - fraction.count) + fraction
    }

    /// The text line: `<time> <name> sender=<:1.n> pid=<pid> uid=<uid> seq=<n> [coalesced=<c>] [gap=<k>] <darwin-notify|foreign> [rejected=<why>]`,
    /// the name escaped (`printable`).
    package var line: String {
        var text = "\(when) \(MonitoredPost.printable(name)) sender=\(sender) pid=\(pid.map(String.init) ?? "-") uid=\(uid.map(String.init) ?? "-")"
        text += " seq=\(sequence.map(String.init) ?? "-")"
        if coalesced > 0 { text += " coalesced=\(coalesced)" }
        if gap > 0 { text += " gap=\(gap)" }
        text += ours ? " darwin-notify" : " foreign"
        if let rejected { text += " rejected=\(rejected)" }
        return text
    }

    /// One JSON object.
    package var json: String {
        let quoted = JSONString.quoted
        let fields = [
            "\"time\":\(when)", "\"name\":\(quoted(name))", "\"sender\":\(quoted(sender))",
            "\"pid\":\(pid.map(String.init) ?? "null")", "\"uid\":\(uid.map(String.init) ?? "null")",
            "\"seq\":\(sequence.map(String.init) ?? "null")", "\"coalesced\":\(coalesced)", "\"gap\":\(gap)", "\"client\":\(ours ? "\"darwin-notify\"" : "\"foreign\"")",
            "\"rejected\":\(rejected.map(quoted) ?? "null")",
        ]
        return "{" + fields.joined(separator: ",") + "}"
    }
}

/// Watches every post on one bus; when the bus goes away, reconnects with backoff (as every
/// registration of the library does) and says so.
package final class BusMonitor {
    private var connection: OpaquePointer
    private let bus: String?
    private var credentials: [String: (pid: UInt32?, uid: UInt32?)] = [:]
    /// The receivers' own rule for gaps and duplicates, and its bounds (CNotify_sequences_*:
    /// center/received.c), not a copy of it.
    private var sequences: OpaquePointer
    static let maxKept = 16384

    private static let typeString = Int32(UInt8(ascii: "s"))
    private static let typeUInt32 = Int32(UInt8(ascii: "u"))
    private static let typeArray = Int32(UInt8(ascii: "a"))
    private static let typeVariant = Int32(UInt8(ascii: "v"))
    private static let typeDictEntry = Int32(UInt8(ascii: "e"))
    private static let signal: Int32 = 4 // DBUS_MESSAGE_TYPE_SIGNAL

    /// Connects to `bus` (an address, or nil: the default bus, as `NotifyCenter.default` uses).
    package init(bus: String?) throws {
        self.bus = bus
        connection = try BusMonitor.connect(bus)
        guard let book = CNotify_sequences_create() else {
            dbus_connection_close(connection)
            dbus_connection_unref(connection)
            throw NotifyError(code: .failed, message: String(cString: CNotify_last_error()))
        }
        sequences = book
    }

    private static func connect(_ bus: String?) throws -> OpaquePointer {
        let address = try EmbeddedBus.resolvedAddress(of: bus)
        var error = DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        guard let connection = dbus_connection_open_private(address, &error) else {
            throw NotifyError(code: .serverNotFound, message: "cannot reach the bus at \(address): \(BusMonitor.text(error))")
        }
        dbus_connection_set_exit_on_disconnect(connection, 0)
        guard dbus_bus_register(connection, &error) != 0 else {
            dbus_connection_close(connection)
            dbus_connection_unref(connection)
            throw NotifyError(code: .serverNotFound, message: "the bus at \(address) refused us: \(BusMonitor.text(error))")
        }
        // Every post, on every bucket interface and the plain one.
        dbus_bus_add_match(connection, "type='signal',path='/org/darwinnotify',member='Post'", &error)
        if dbus_error_is_set(&error) != 0 {
            dbus_connection_close(connection)
            dbus_connection_unref(connection)
            throw NotifyError(code: .failed, message: "the bus at \(address) refused the monitor's match rule: \(BusMonitor.text(error))")
        }
        return connection
    }

    deinit {
        dbus_connection_close(connection)
        dbus_connection_unref(connection)
        CNotify_sequences_destroy(sequences)
    }

    /// Calls `report` for each post, in arrival order. When the bus goes away it tells `notice`,
    /// reconnects with backoff (0.1 s doubling to 5 s), and tells `notice` again; it returns
    /// only by throwing, when `maxReconnectAttempts` (nil: no limit) attempts in a row failed.
    package func run(maxReconnectAttempts: Int? = nil, notice: (String) -> Void = { _ in },
                    _ report: (MonitoredPost) -> Void) throws {
        while true {
            while dbus_connection_read_write(connection, -1) != 0 {
                while let message = dbus_connection_pop_message(connection) {
                    defer { dbus_message_unref(message) }
                    if let post = describe(message) { report(post) }
                }
            }
            notice("the bus went away; reconnecting")
            try reconnect(maxAttempts: maxReconnectAttempts)
            notice("reconnected; posts made while the bus was away were not seen")
        }
    }

    private func reconnect(maxAttempts: Int?) throws {
        var delay: UInt32 = 100_000
        var attempt = 0
        while true {
            attempt += 1
            do {
                let fresh = try BusMonitor.connect(bus)
                dbus_connection_close(connection)
                dbus_connection_unref(connection)
                connection = fresh
                // A restarted daemon hands out the same unique names again: nothing learnt
                // about a sender of the old one holds.
                credentials.removeAll()
                if let book = CNotify_sequences_create() {
                    CNotify_sequences_destroy(sequences)
                    sequences = book
                }
                return
            } catch {
                if let maxAttempts, attempt >= maxAttempts { throw error }
            }
            usleep(delay)
            delay = min(delay * 2, 5_000_000)
        }
    }

    private func describe(_ message: OpaquePointer) -> MonitoredPost? {
        guard dbus_message_get_type(message) == BusMonitor.signal,
              let member = dbus_message_get_member(message), String(cString: member) == "Post",
              let interfacePointer = dbus_message_get_interface(message) else { return nil }
        let interface = String(cString: interfacePointer)
        guard interface.hasPrefix("org.darwinnotify.Notify") else { return nil }
        let sender = dbus_message_get_sender(message).map { String(cString: $0) } ?? "?"
        // Read as every receiver reads it (the C core's parser, CNotify_protocol_read_post); what
        // receivers refuse is still shown, marked, with the text the bus carried.
        var buffer = [CChar](repeating: 0, count: Int(CNOTIFY_NAME_MAX) + 1)
        var value: UInt64 = 0, hasSequence: Int32 = 0, origin: UInt64 = 0, count: UInt32 = 1
        let read = CNotify_protocol_read_post(UnsafeRawPointer(message), &buffer, buffer.count, &value, &hasSequence, &origin, &count)
        let name: String
        let sequence: UInt64? = read == UInt32(NOTIFY_STATUS_OK) && hasSequence != 0 ? value : nil
        var gap: UInt64 = 0
        var rejected: String?
        if read == UInt32(NOTIFY_STATUS_OK) {
            name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        } else {
            name = BusMonitor.firstString(message) ?? ""
            rejected = "malformed"
        }
        if credentials.count >= BusMonitor.maxKept { credentials.removeAll() } // bounded, as the C core's per-sender tables
        let who = credentials[sender] ?? askCredentials(of: sender)
        credentials[sender] = who
        let ours = sequence != nil && interface == NotifyCenter.bucketInterface(of: name)
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        if rejected != nil {
            // malformed: receivers drop it before looking at its name
        } else if name.hasPrefix("self.") {
            rejected = "self"
        } else if case .uid(let owner) = NotifyCenter.restriction(of: name) {
            // As receivers judge it: by the bus's word on the sender while it is connected; a
            // sender already gone is proven only by a credential (a descriptor, 'h').
            let hasCredential = dbus_message_get_signature(message).map { String(cString: $0).contains("h") } ?? false
            if let uid = who.uid { if uid != owner && uid != 0 { rejected = "uid" } }
            else if !hasCredential { rejected = "uid" }
        }
        // Its number, as receivers note it: only for a post they took so far (authenticated first).
        if rejected == nil, let sequence {
            var duplicate: Int32 = 0
            if CNotify_sequences_note(sequences, sender, origin, name, sequence, count, &duplicate, &gap) == UInt32(NOTIFY_STATUS_OK), duplicate != 0 {
                rejected = "duplicate"
            }
        }
        return MonitoredPost(time: Double(now.tv_sec) + Double(now.tv_nsec) / 1e9, name: name, sender: sender,
                             pid: who.pid, uid: who.uid, sequence: sequence, gap: gap,
                             coalesced: rejected == nil && count > 1 ? UInt64(count - 1) : 0, ours: ours, rejected: rejected)
    }

    /// The first argument when it is a string: the name of a Post receivers refuse, as it was sent.
    private static func firstString(_ message: OpaquePointer) -> String? {
        var it = DBusMessageIter()
        guard dbus_message_iter_init(message, &it) != 0, dbus_message_iter_get_arg_type(&it) == typeString else { return nil }
        var pointer: UnsafePointer<CChar>?
        dbus_message_iter_get_basic(&it, &pointer)
        return pointer.map { String(cString: $0) }
    }

    /// GetConnectionCredentials: ProcessID and UnixUserID; nils once the sender has gone.
    private func askCredentials(of sender: String) -> (pid: UInt32?, uid: UInt32?) {
        guard let call = dbus_message_new_method_call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                                      "GetConnectionCredentials") else { return (nil, nil) }
        defer { dbus_message_unref(call) }
        var it = DBusMessageIter()
        dbus_message_iter_init_append(call, &it)
        let appended = sender.withCString { chars -> Bool in
            var pointer: UnsafePointer<CChar>? = chars
            return dbus_message_iter_append_basic(&it, BusMonitor.typeString, &pointer) != 0
        }
        guard appended else { return (nil, nil) }
        var error = DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        guard let reply = dbus_connection_send_with_reply_and_block(connection, call, 2000, &error) else { return (nil, nil) }
        defer { dbus_message_unref(reply) }
        var pid: UInt32?, uid: UInt32?
        var array = DBusMessageIter(), entries = DBusMessageIter()
        guard dbus_message_iter_init(reply, &array) != 0, dbus_message_iter_get_arg_type(&array) == BusMonitor.typeArray else { return (nil, nil) }
        dbus_message_iter_recurse(&array, &entries)
        while dbus_message_iter_get_arg_type(&entries) == BusMonitor.typeDictEntry {
            var entry = DBusMessageIter(), variant = DBusMessageIter()
            dbus_message_iter_recurse(&entries, &entry)
            var keyPointer: UnsafePointer<CChar>?
            dbus_message_iter_get_basic(&entry, &keyPointer)
            let key = keyPointer.map { String(cString: $0) } ?? ""
            if dbus_message_iter_next(&entry) != 0, dbus_message_iter_get_arg_type(&entry) == BusMonitor.typeVariant {
                dbus_message_iter_recurse(&entry, &variant)
                if dbus_message_iter_get_arg_type(&variant) == BusMonitor.typeUInt32 {
                    var value: UInt32 = 0
                    dbus_message_iter_get_basic(&variant, &value)
                    if key == "ProcessID" { pid = value } else if key == "UnixUserID" { uid = value }
                }
            }
            dbus_message_iter_next(&entries)
        }
        return (pid, uid)
    }

    private static func text(_ error: DBusError) -> String {
        error.message.map { String(cString: $0) } ?? "unknown error"
    }
}

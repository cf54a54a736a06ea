// BusClaim: one notify-bridge per user and bus. Two bridges on one bus would export every post
// twice (with distinct client ids) or knock each other off the broker forever (with the same
// default one), so a bridge owns the well-known name `org.darwinnotify.Bridge.uid<N>` on its bus
// for as long as it runs, on a connection of its own, and a second one is refused with a sentence
// naming the first. Another user can own any name a policy lets it own: a name held by another
// uid is a squat, not a bridge of ours, and is reported without stopping the bridge. After a bus
// restart the claim is gone (the bridge's registrations come back; this name does not).
import CDBus
import DarwinNotify

#if canImport(Glibc)
import Glibc
#endif

final class BusClaim: @unchecked Sendable { // the connection is only closed, in deinit
    static let prefix = "org.darwinnotify.Bridge"
    static var name: String { "\(prefix).uid\(getuid())" }
    private let connection: OpaquePointer

    /// What claiming the name found: ours, or why not (a policy that forbids owning it is
    /// reported by the caller and the bridge goes on: detection is then not possible there).
    enum Outcome { case claimed(BusClaim), denied(String) }

    /// Claims the name on `bus`; throws when another bridge holds it.
    static func claim(bus: String?) throws(BridgeError) -> Outcome {
        let address: String
        do { address = try EmbeddedBus.resolvedAddress(of: bus) } catch { throw BridgeError(.localBus, "cannot use the bus \(bus ?? "(default)"): \(error)") }
        var error = DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        guard let connection = dbus_connection_open_private(address, &error) else {
            throw BridgeError(.localBus, "cannot reach the bus at \(address): \(text(error))")
        }
        dbus_connection_set_exit_on_disconnect(connection, 0)
        let close = { dbus_connection_close(connection); dbus_connection_unref(connection) }
        guard dbus_bus_register(connection, &error) != 0 else {
            close()
            throw BridgeError(.localBus, "the bus at \(address) refused us: \(text(error))")
        }
        let reply = dbus_bus_request_name(connection, name, UInt32(DBUS_NAME_FLAG_DO_NOT_QUEUE), &error)
        if dbus_error_is_set(&error) != 0 {
            let why = text(error)
            close()
            return .denied("cannot own \(name) on \(address) (\(why)), so a second bridge on this bus would not be detected; allow it in the bus policy (docs/dbus/org.darwinnotify.conf)")
        }
        if reply == Int32(DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER) || reply == Int32(DBUS_REQUEST_NAME_REPLY_ALREADY_OWNER) {
            return .claimed(BusClaim(connection))
        }
        let (owner, ownerUID) = describeOwner(connection)
        close()
        if let ownerUID, ownerUID != getuid() {
            return .denied("\(name) on \(address) is held by uid \(ownerUID)\(owner), not by a bridge of ours: a second bridge of ours on this bus would not be detected")
        }
        throw BridgeError(.localBus, "another notify-bridge\(owner) already serves the bus at \(address): two would export every post twice, or knock each other off the broker; stop it first (one bridge can export and import several namespaces)")
    }

    private init(_ connection: OpaquePointer) { self.connection = connection }

    deinit {
        dbus_connection_close(connection)
        dbus_connection_unref(connection)
    }

    /// " (pid N, uid U)" of the name's owner, or "" when the bus will not say; and the uid.
    private static func describeOwner(_ connection: OpaquePointer) -> (String, UInt32?) {
        func ask(_ member: String) -> UInt32? {
            guard let call = dbus_message_new_method_call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", member)
            else { return nil }
            defer { dbus_message_unref(call) }
            let appended = name.withCString { chars -> Bool in
                var pointer: UnsafePointer<CChar>? = chars
                return appendString(call, &pointer)
            }
            guard appended else { return nil }
            var error = DBusError()
            dbus_error_init(&error)
            defer { dbus_error_free(&error) }
            guard let reply = dbus_connection_send_with_reply_and_block(connection, call, 2000, &error) else { return nil }
            defer { dbus_message_unref(reply) }
            var it = DBusMessageIter()
            guard dbus_message_iter_init(reply, &it) != 0, dbus_message_iter_get_arg_type(&it) == Int32(UInt8(ascii: "u")) else { return nil }
            var value: UInt32 = 0
            dbus_message_iter_get_basic(&it, &value)
            return value
        }
        let pid = ask("GetConnectionUnixProcessID"), uid = ask("GetConnectionUnixUser")
        guard pid != nil || uid != nil else { return ("", nil) }
        return (" (pid \(pid.map(String.init) ?? "?"), uid \(uid.map(String.init) ?? "?"))", uid)
    }

    private static func text(_ error: DBusError) -> String {
        error.message.map { String(cString: $0) } ?? "unknown error"
    }
}

/// Appends one string argument (libdbus's variadic dbus_message_append_args is not callable from Swift).
private func appendString(_ message: OpaquePointer, _ pointer: inout UnsafePointer<CChar>?) -> Bool {
    var it = DBusMessageIter()
    dbus_message_iter_init_append(message, &it)
    return dbus_message_iter_append_basic(&it, Int32(UInt8(ascii: "s")), &pointer) != 0
}

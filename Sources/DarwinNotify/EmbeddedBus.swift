import CNotify

/// The library's version, "MAJOR.MINOR.PATCH" (`CNotify_version`; the VERSION file of the source
/// tree), which both CLIs print for `--version`.
public let darwinNotifyVersion = String(cString: CNotify_version())

/// The embedded bus: a per-user dbus-daemon that DarwinNotify starts on first use.
public enum EmbeddedBus {
    public struct Status: Sendable, Equatable {
        public let running: Bool
        public let address: String
        public let directory: String
    }

    /// Reports whether it runs, its address and its runtime directory (`CNotify_embedded_bus_status`).
    public static func status() throws(NotifyError) -> Status {
        var running: Int32 = 0
        var address = [CChar](repeating: 0, count: 4200)
        var directory = [CChar](repeating: 0, count: 4200)
        try NotifyError.check(CNotify_embedded_bus_status(&running, &address, address.count, &directory, directory.count))
        return Status(running: running != 0, address: decode(address), directory: decode(directory))
    }

    /// Which bus a center with no address uses (`CNotify_default_bus`): `scope` is
    /// "DARWIN_NOTIFY_BUS", "system" (installed system-wide and the system bus answers) or
    /// "embedded".
    public static func defaultBus() throws(NotifyError) -> (scope: String, address: String) {
        var scope = [CChar](repeating: 0, count: 64)
        var address = [CChar](repeating: 0, count: 4200)
        try NotifyError.check(CNotify_default_bus(&scope, scope.count, &address, address.count))
        return (decode(scope), decode(address))
    }

    /// The address a center on `bus` (an address, "session", "system", "embedded"; nil for the
    /// default) connects to, resolved as every center does (`CNotify_bus_address`); the embedded
    /// bus is started if needed. For tools that open a D-Bus connection of their own.
    public static func resolvedAddress(of bus: String?) throws(NotifyError) -> String {
        var address = [CChar](repeating: 0, count: 4200)
        try NotifyError.check(CNotify_bus_address(bus, &address, address.count))
        return decode(address)
    }

    /// Starts it unless it runs; returns its address (`CNotify_embedded_bus_start`).
    @discardableResult
    public static func start() throws(NotifyError) -> String {
        var address = [CChar](repeating: 0, count: 4200)
        try NotifyError.check(CNotify_embedded_bus_start(&address, address.count))
        return decode(address)
    }

    /// Stops it (`CNotify_embedded_bus_stop`); throws `.serverNotFound` if it was not running.
    public static func stop() throws(NotifyError) {
        try NotifyError.check(CNotify_embedded_bus_stop())
    }

    private static func decode(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

extension EmbeddedBus {
    /// The dbus-daemon configuration the embedded bus runs with, for another private bus (a
    /// test's, a benchmark's): `CNotify_bus_config`. `policy` nil: the embedded bus's own (this
    /// user's processes may do everything); `embeddedLimits` false: dbus-daemon's built-in limits.
    public static func configuration(listen: String, type: String = "session", pidFile: String? = nil,
                                     policy: String? = nil, embeddedLimits: Bool = false) throws(NotifyError) -> String {
        var buffer = [CChar](repeating: 0, count: 64 * 1024)
        try NotifyError.check(CNotify_bus_config(listen, type, pidFile, policy, embeddedLimits ? 1 : 0, &buffer, buffer.count))
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

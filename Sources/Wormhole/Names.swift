/// Validation of the names that become paths and notification names. Everything a wormhole puts on
/// disk is named by these, so they are checked before any file is touched.
enum Names {
    /// Message identifiers become one path component: at most NAME_MAX bytes.
    static let maxIdentifierBytes = 255
    /// Keeps the notification name (docs/PROTOCOL.md) under the core's 512-byte limit.
    static let maxGroupBytes = 128
    static let maxDirectoryBytes = 64

    /// Group identifiers look like Apple's (`group.com.example.app`).
    static func validateGroup(_ group: String) throws(WormholeError) {
        let bytes = Array(group.utf8)
        guard !bytes.isEmpty, bytes.count <= maxGroupBytes else {
            throw WormholeError(.invalidGroup, "group identifier '\(group)' must be 1…\(maxGroupBytes) bytes")
        }
        let allowed = bytes.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a)
                || b == 0x2e || b == 0x2d || b == 0x5f
        }
        guard allowed, bytes.first != 0x2e, !group.contains("..") else {
            throw WormholeError(.invalidGroup,
                "group identifier '\(group)' may hold only letters, digits, '.', '-', '_', and may not start with '.' or hold '..'")
        }
    }

    static func validateIdentifier(_ identifier: String) throws(WormholeError) {
        try validateComponent(identifier, what: "identifier", limit: maxIdentifierBytes)
    }

    static func validateDirectory(_ directory: String) throws(WormholeError) {
        try validateComponent(directory, what: "directory name", limit: maxDirectoryBytes)
    }

    /// Listener names become cursor file names.
    static func validateListenerName(_ name: String) throws(WormholeError) {
        try validateComponent(name, what: "listener name", limit: maxIdentifierBytes - 8)
    }

    private static func validateComponent(_ value: String, what: String, limit: Int) throws(WormholeError) {
        let bytes = value.utf8
        // Built only for a message: validation runs on every pass and read.
        var shown: String {
            String(value.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7f ? "?" : Character($0) }.prefix(80))
        }
        guard !bytes.isEmpty else { throw WormholeError(.invalidIdentifier, "\(what) is empty") }
        guard bytes.count <= limit else {
            throw WormholeError(.invalidIdentifier, "\(what) '\(shown)…' is \(bytes.count) bytes; the limit is \(limit)")
        }
        // One look at each byte (String.contains("..") alone cost about 2 µs a pass). ".." is
        // two dot bytes, even where a combining mark follows the second.
        var slash = false, dots = false, nul = false, control = false, previous: UInt8 = 0
        for b in bytes {
            if b == 0x2f { slash = true } else if b == 0 { nul = true } else if b < 0x20 || b == 0x7f { control = true }
            if b == 0x2e && previous == 0x2e { dots = true }
            previous = b
        }
        if slash { throw WormholeError(.invalidIdentifier, "\(what) '\(shown)' contains '/'") }
        if dots { throw WormholeError(.invalidIdentifier, "\(what) '\(shown)' contains '..'") }
        if nul { throw WormholeError(.invalidIdentifier, "\(what) '\(shown)' contains NUL") }
        if control { throw WormholeError(.invalidIdentifier, "\(what) '\(shown)' contains a control character") }
        // Names starting with '.' are ours (temporary files, lock files).
        if bytes.first == 0x2e { throw WormholeError(.invalidIdentifier, "\(what) '\(shown)' starts with '.'") }
    }

    /// The notification that announces a message: namespaced by group, wormhole directory and
    /// identifier, so two apps using the same identifier never hear each other.
    static func notificationName(group: String, directory: String, identifier: String) -> String {
        "org.darwinnotify.wormhole/\(group)/\(directory)/\(identifier)"
    }
}

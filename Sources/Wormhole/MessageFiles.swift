import FoundationEssentials
import Glibc
import SystemPackage

/// `file` and `coordinated` transiting: the latest message of each identifier, one file each.
struct MessageFiles: Sendable {
    let layout: Layout
    let coordinated: Bool
    let configuration: WormholeConfiguration

    /// Replaces the message atomically: written again in place under a lease when it can be
    /// (InPlace.swift), else a complete file, synced (`syncToDisk`), renamed over the message
    /// (SpareFile.swift). What is left to do after the announcement is returned.
    @discardableResult
    func write(_ envelope: Envelope, identifier: String) throws(WormholeError) -> SpareFiles.Replaced {
        let lock = coordinated ? try FileLock(layout.lock(identifier), exclusive: true, permissions: layout.filePermissions) : nil
        defer { lock?.unlock() }
        return try replace(identifier, with: envelope.encoded())
    }

    private func replace(_ identifier: String, with bytes: Data) throws(WormholeError) -> SpareFiles.Replaced {
        if try InPlace.write(layout.message(identifier), with: bytes, permissions: layout.filePermissions,
                             sync: configuration.syncToDisk) {
            return .nothing
        }
        guard configuration.syncToDisk else {
            try PosixFiles.replaceAtomically(layout.message(identifier), with: bytes, permissions: layout.filePermissions, sync: false)
            return .nothing
        }
        return try SpareFiles.shared.replace(layout.message(identifier), with: bytes, permissions: layout.filePermissions)
    }

    /// The current message, nil if there is none. A damaged file is quarantined and reported.
    func read(_ identifier: String) throws(WormholeError) -> WormholeMessage? {
        let lock = coordinated ? try FileLock(layout.lock(identifier), exclusive: false, permissions: layout.filePermissions) : nil
        defer { lock?.unlock() }
        return try readUnlocked(identifier)
    }

    func readUnlocked(_ identifier: String) throws(WormholeError) -> WormholeMessage? {
        let path = layout.message(identifier)
        let bytes: Data
        switch try PosixFiles.readMessage(path, limit: configuration.maxFileBytes) {
        case .missing: return nil
        case .bytes(let data): bytes = data
        case .tooLarge(let size):
            // Left in place: a writer with a larger limit wrote it for readers with one; the next
            // pass replaces it.
            throw WormholeError(.payloadTooLarge, "\(path) is \(size) bytes, over this wormhole's limit of \(configuration.maxFileBytes)")
        case .unusable(let what):
            let moved = try layout.quarantine(path, identifier: identifier)
            throw WormholeError(.corruptMessage, "message '\(identifier)' is \(what), not a message file; moved to \(moved)",
                                quarantinedPath: moved.string)
        }
        switch Envelope.decode(bytes) {
        case .success(let envelope):
            return WormholeMessage(identifier: identifier, envelope: envelope, sequence: nil)
        case .failure(let fault):
            let moved = try layout.quarantine(path, identifier: identifier)
            throw WormholeError(.corruptMessage,
                "message '\(identifier)' is damaged (\(fault.reason)); moved to \(moved)", quarantinedPath: moved.string)
        }
    }

    /// Reads, changes and writes back a message under the exclusive lock: no update is lost when
    /// several processes update at once. `body` gets nil when there is no message (or a damaged
    /// one, which is quarantined first); returning with the value set to nil clears the message.
    func update<T: Codable>(_ identifier: String, as type: T.Type,
                            _ body: (inout T?) throws -> Void) throws(WormholeError) -> T? {
        var replaced = SpareFiles.Replaced.nothing
        defer { replaced.finish() }
        let lock = try FileLock(layout.lock(identifier), exclusive: true, permissions: layout.filePermissions)
        defer { lock.unlock() }
        var value: T?
        do {
            value = try readUnlocked(identifier)?.decode(T.self)
        } catch where error.code == .corruptMessage {
            value = nil
        }
        do {
            try body(&value)
        } catch let error as WormholeError {
            throw error
        } catch {
            throw WormholeError(.encodingFailed, "update of '\(identifier)' cancelled by its closure, nothing written: \(error)")
        }
        guard let value else {
            try PosixFiles.remove(layout.message(identifier))
            return nil
        }
        let payload: Data
        do { payload = try JSONEncoder().encode(value) } catch {
            throw WormholeError(.encodingFailed, "cannot encode \(T.self) as JSON: \(error)")
        }
        guard payload.count <= configuration.maxPayloadBytes else {
            throw WormholeError(.payloadTooLarge, "payload is \(payload.count) bytes, over the limit of \(configuration.maxPayloadBytes); nothing was written")
        }
        replaced = try replace(identifier, with: Envelope(kind: .json, payload: payload).encoded())
        return value
    }

    func clear(_ identifier: String) throws(WormholeError) {
        let lock = coordinated ? try FileLock(layout.lock(identifier), exclusive: true, permissions: layout.filePermissions) : nil
        defer { lock?.unlock() }
        try PosixFiles.remove(layout.message(identifier))
    }

    func identifiers() throws(WormholeError) -> [String] {
        try PosixFiles.listDirectory(layout.messages)
    }
}

import FoundationEssentials
import Glibc
// Mirroring: a wormhole's messages as bytes that travel to another host and are stored there
// unchanged (notify-bridge --wormhole, docs/BRIDGE.md). `package`: only this package's bridge
// uses it; it is not a public API yet.

extension Envelope {
    /// A message as it was read, back in its file form: same id, kind, time and payload.
    init(_ message: WormholeMessage, pid: Int32) {
        header = Header(id: message.messageID, kind: message.kind, length: message.payload.count,
                        checksum: Checksum.hex(of: message.payload),
                        passed: message.passedAt.timeIntervalSince1970, pid: pid)
        payload = message.payload
    }
}

extension WormholeMessage {
    /// Whether the message arrived from another host through a bridge: a mirrored copy is
    /// written with pid 0, which no passing process has (docs/PROTOCOL.md, "Message file"), so a
    /// bridge never sends it out again, even after a restart.
    package var isMirrored: Bool { senderPID == 0 }
}

extension Wormhole {
    /// The message in its file form (docs/PROTOCOL.md, "Message file"), to send elsewhere.
    package func encodedForMirror(_ message: WormholeMessage) -> Data {
        Envelope(message, pid: message.senderPID).encoded()
    }

    /// Stores a message that `encodedForMirror` made on another host, keeping its id (so its
    /// listeners there and here dedupe alike), kind, time and payload, with pid 0 (mirrored), and
    /// announces it. A `file` message whose id is already the current one is not written again.
    /// - Returns: the stored message, or nil when it was already there.
    /// - Throws: `.corruptMessage` for bytes that are not a whole message (nothing is written),
    ///   `.payloadTooLarge` and the errors of `pass`.
    @discardableResult
    package func storeMirrored(_ encoded: Data, identifier: String) throws(WormholeError) -> WormholeMessage? {
        try Names.validateIdentifier(identifier)
        let decoded: Envelope
        switch Envelope.decode(encoded) {
        case .success(let envelope): decoded = envelope
        case .failure(let fault): throw WormholeError(.corruptMessage, "mirrored message for '\(identifier)': \(fault.reason)")
        }
        guard decoded.payload.count <= configuration.maxPayloadBytes else {
            throw WormholeError(.payloadTooLarge,
                "mirrored payload for '\(identifier)' is \(decoded.payload.count) bytes, over the limit of \(configuration.maxPayloadBytes)")
        }
        let message = WormholeMessage(identifier: identifier, envelope: decoded, sequence: nil)
        let envelope = Envelope(message, pid: 0)
        guard try store.mirror(envelope, message: message, identifier: identifier) else { return nil }
        try announce(identifier)
        return WormholeMessage(identifier: identifier, envelope: envelope, sequence: nil)
    }

    /// Whether `identifier` has a queue directory (one `stat`, for each announcement).
    package func hasQueue(_ identifier: String) -> Bool {
        var info = stat()
        return stat(layout.queue(identifier).string, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
    }

    /// Identifiers with a `messages/` file and with a queue directory, whatever this wormhole's
    /// transiting: what a mirror starts from.
    package func mirrorableIdentifiers() -> (files: [String], queues: [String]) {
        let files = (try? self.files.identifiers()) ?? []
        let queues = (try? PosixFiles.listDirectory(layout.queues)) ?? []
        return (files, queues.filter { (try? Names.validateIdentifier($0)) != nil })
    }
}

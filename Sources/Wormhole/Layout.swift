#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import FoundationEssentials
import SystemPackage
import Synchronization

/// Where a wormhole keeps its files inside the group container (docs/PROTOCOL.md):
///
///     <container>/<directory>/messages/<identifier>      latest message (file, coordinated)
///     <container>/<directory>/locks/<identifier>         flock(2) target (coordinated)
///     <container>/<directory>/queues/<identifier>/       one queue (queue transiting)
///     <container>/<directory>/quarantine/<identifier>/   damaged files, moved aside
struct Layout: Sendable {
    let base: FilePath
    let shared: Bool
    let messages: FilePath
    let locks: FilePath
    let queues: FilePath
    let quarantine: FilePath
    /// `messages/`, `locks/` and `queues/` as text, for the paths of every pass and read:
    /// `FilePath.appending` parses what it is given and costs more than the rest of building the
    /// path (in a debug build, most of a queue pass's time).
    private let messagesPrefix: String
    private let locksPrefix: String
    private let queuesPrefix: String

    init(base: FilePath, shared: Bool) {
        self.base = base
        self.shared = shared
        messages = base.appending("messages")
        locks = base.appending("locks")
        queues = base.appending("queues")
        quarantine = base.appending("quarantine")
        messagesPrefix = messages.string + "/"
        locksPrefix = locks.string + "/"
        queuesPrefix = queues.string + "/"
    }

    /// `identifier` is one validated by `Names.validateIdentifier`: a single path component.
    func message(_ identifier: String) -> FilePath { FilePath(messagesPrefix + identifier) }
    func lock(_ identifier: String) -> FilePath { FilePath(locksPrefix + identifier) }
    func queue(_ identifier: String) -> FilePath { FilePath(queuesPrefix + identifier) }
    /// `queues/<identifier>/` as text, for the paths inside one queue.
    func queuePrefix(_ identifier: String) -> String { queuesPrefix + identifier + "/" }

    var filePermissions: FilePermissions {
        shared ? [.ownerReadWrite, .groupReadWrite] : [.ownerReadWrite]
    }
    var directoryPermissions: FilePermissions { GroupContainer.permissions(shared: shared) }

    func makeDirectories() throws(WormholeError) {
        for directory in [base, messages, locks, queues, quarantine] {
            try PosixFiles.makeDirectory(directory, permissions: directoryPermissions)
            try GroupContainer.checkSubdirectory(directory, shared: shared)
        }
    }

    private static let quarantineCounter = Atomic<UInt64>(0)

    /// Moves a damaged file out of the way, so that nobody reads it again and nothing is lost:
    /// `quarantine/<identifier>/<seconds>-<pid>-<n>[-<name>]`. Returns the new path.
    func quarantine(_ path: FilePath, identifier: String) throws(WormholeError) -> FilePath {
        let last = path.lastComponent?.string
        let destination = try quarantinePath(identifier, name: last == identifier ? nil : last)
        if rename(path.string, destination.string) != 0 {
            throw .io("move \(path) to quarantine", Errno(rawValue: errno))
        }
        return destination
    }

    /// Keeps a copy of a damaged queue record, which cannot be moved out of its segment:
    /// `quarantine/<identifier>/<seconds>-<pid>-<n>-<name>`. Returns its path.
    func quarantine(copyOf bytes: Data, identifier: String, name: String) throws(WormholeError) -> FilePath {
        let destination = try quarantinePath(identifier, name: name)
        let fd = open(destination.string, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, filePermissions.rawValue)
        guard fd >= 0 else { throw .io("create \(destination)", Errno(rawValue: errno)) }
        defer { close(fd) }
        do {
            _ = try bytes.withUnsafeBytes { try FileDescriptor(rawValue: fd).writeAll($0) }
        } catch {
            throw .io("write \(destination)", error as? Errno ?? .ioError)
        }
        return destination
    }

    private func quarantinePath(_ identifier: String, name: String?) throws(WormholeError) -> FilePath {
        let folder = quarantine.appending(identifier)
        try PosixFiles.makeDirectory(folder, permissions: directoryPermissions)
        var file = "\(Int(Date().timeIntervalSince1970))-\(getpid())-\(Layout.quarantineCounter.wrappingAdd(1, ordering: .relaxed).newValue)"
        if let name { file += "-" + name }
        return folder.appending(file)
    }
}

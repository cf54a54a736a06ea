// State watcher: notices `notify_set_state` of other processes by watching the bus's state
// directory with inotify (state values are files, never signals: docs/PROTOCOL.md, "State
// files"). It reports only a name: the bridge reads the value through the core, which applies
// every ownership and mode check, so nothing here is trusted beyond "look at this name".
import DarwinNotify
import FoundationEssentials
import Glibc
import Synchronization
import SystemPackage

final class StateWatcher: Sendable {
    let directory: String
    private let uid: uid_t
    private let changed: @Sendable (String) -> Void
    private let fd = Atomic<Int32>(-1)
    /// Watch descriptor → directory path.
    private let watched = Mutex<[Int32: String]>([:])

    /// Where the state directory appears when it does not exist yet, and its name there.
    private let parent: String, directoryName: String?

    init(directory: String, uid: uid_t, changed: @escaping @Sendable (String) -> Void) {
        self.directory = directory
        parent = FilePath(directory).removingLastComponent().string
        directoryName = FilePath(directory).lastComponent?.string
        self.uid = uid
        self.changed = changed
    }

    struct Failure: Error, CustomStringConvertible { let description: String }

    func start() throws(Failure) {
        let descriptor = inotify_init1(Int32(IN_CLOEXEC))
        guard descriptor >= 0 else { throw Failure(description: "inotify_init1: \(String(cString: strerror(errno)))") }
        fd.store(descriptor, ordering: .releasing)
        // The state directory may not exist yet (nobody set a state): wait for it from its parent.
        _ = addWatch(parent, mask: UInt32(IN_CREATE | IN_MOVED_TO))
        watchTree()
        BackgroundThread.start(name: "bridge states") { [self] in readEvents(descriptor) }
    }

    func stop() {
        let descriptor = fd.exchange(-1, ordering: .acquiringAndReleasing)
        if descriptor >= 0 { close(descriptor) }
    }

    /// The directories whose files may hold states we export: `plain/`, and our `uid.N*` (all
    /// of them when we are root, who may export any user's names).
    private func isRelevant(_ entry: String) -> Bool {
        if entry == "plain" || entry.hasPrefix("plain.") { return true } // plain.XXXXXX: a squatted plain/ replaced (PROTOCOL.md)
        if uid == 0 { return entry.hasPrefix("uid.") }
        return entry == "uid.\(uid)" || entry.hasPrefix("uid.\(uid).")
    }

    /// Watches the state directory and its relevant subdirectories. After start (`report`), the
    /// files already in a directory that appeared are reported too: a state may have been
    /// written there before the watch was added.
    private func watchTree(report: Bool = false) {
        _ = addWatch(directory, mask: UInt32(IN_CREATE | IN_MOVED_TO))
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where isRelevant(entry) {
            let dir = directory + "/" + entry
            _ = addWatch(dir, mask: UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MODIFY))
            guard report else { continue }
            for file in (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [] {
                if let name = Self.name(inFile: dir + "/" + file, named: file) { changed(name) }
            }
        }
    }

    private func addWatch(_ path: String, mask: UInt32) -> Bool {
        let descriptor = fd.load(ordering: .acquiring)
        guard descriptor >= 0 else { return false }
        let wd = inotify_add_watch(descriptor, path, mask | UInt32(IN_ONLYDIR) | UInt32(IN_DONT_FOLLOW))
        guard wd >= 0 else { return false }
        watched.withLock { $0[wd] = path }
        return true
    }

    /// Names of the state files present now (for the states set before the bridge started).
    func namesPresent() -> [String] {
        var names: [String] = []
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where isRelevant(entry) {
            let dir = directory + "/" + entry
            for file in (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [] {
                if let name = Self.name(inFile: dir + "/" + file, named: file) { names.append(name) }
            }
        }
        return names
    }

    private func readEvents(_ descriptor: Int32) {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return } // closed by stop()
            var offset = 0
            while offset + MemoryLayout<inotify_event>.size <= count {
                let (wd, mask, length) = buffer.withUnsafeBytes { raw in
                    let event = raw.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                    return (event.wd, event.mask, Int(event.len))
                }
                let nameStart = offset + MemoryLayout<inotify_event>.size
                let nameBytes = buffer[nameStart ..< min(count, nameStart + length)].prefix { $0 != 0 }
                let entry = String(decoding: nameBytes, as: UTF8.self)
                offset = nameStart + length
                if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                    for name in namesPresent() { changed(name) } // events were lost: look at all
                    continue
                }
                guard let dir = watched.withLock({ $0[wd] }) else { continue }
                if dir == directory {
                    if isRelevant(entry) { watchTree(report: true) } // plain/ or uid.N made after we started
                } else if dir == parent {
                    if entry == directoryName { watchTree(report: true) } // the state directory appeared
                } else if let name = Self.name(inFile: dir + "/" + entry, named: entry) {
                    changed(name)
                }
            }
        }
    }

    /// The name a state file holds, if it is one (32 hex digits of the name's hash, checked
    /// against the name it holds); opened without following links or blocking.
    static func name(inFile path: String, named file: String) -> String? {
        guard file.utf8.count == 32, !file.hasPrefix(".") else { return nil }
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        var bytes = [UInt8](repeating: 0, count: 8 + NotifyCenter.maxNameLength + 1)
        let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 8, count <= 8 + NotifyCenter.maxNameLength,
              let name = String(validating: bytes[8 ..< count], as: UTF8.self) else { return nil }
        return NotifyCenter.stateFileName(of: name) == file ? name : nil
    }
}

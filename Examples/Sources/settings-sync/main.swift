// settings-sync: an app and its helper (the iOS ↔ watchOS `needSyncDatabase` handshake) share one
// SQLite database in their group container. After each edit a side sets the *other* side's
// `needSyncDatabase` flag through a coordinated wormhole (an atomic read-modify-write across
// processes) and posts a Darwin notification. A side reloads only when told and only if its own
// flag is set, clearing it in the same atomic step; at start it reloads if the flag was set while
// it was not running. No timer: without the notification, nothing is reloaded (the test checks
// it). Run two at once: `settings-sync app DIR 50` and `settings-sync helper DIR 50`.
import DarwinNotify
import Dispatch
import Foundation
import GRDB
import Synchronization
import Wormhole

let arguments = CommandLine.arguments
guard arguments.count == 4, ["app", "helper"].contains(arguments[1]), let edits = Int(arguments[3]), edits > 0 else {
    FileHandle.standardError.write(Data("usage: settings-sync app|helper CONTAINER-DIR EDITS\n".utf8))
    exit(64)
}
let role = arguments[1], directory = arguments[2]
let peer = role == "app" ? "helper" : "app"
let peers = 2 // the app and its helper, each making `edits` edits
let changed = "com.example.settings.changed"

/// What this side has loaded of the peer's edits: their number in the database at its last reload.
let peerLoaded = Mutex(0)
let reloads = Mutex(0)
let reloaded = DispatchSemaphore(value: 0)

do {
    let container = try GroupContainer(group: "group.com.example.settings", directory: directory)
    // Both sides may open, and so create, the database at the same moment. Switching a new database
    // to WAL takes a lock SQLite does not wait for, so the opening is serialised with flock(2) on a
    // file beside it; afterwards SQLite's own locks (and a busy timeout) suffice.
    var configuration = Configuration()
    configuration.busyMode = .timeout(10)
    let openLock = open(container.path + "/settings.sqlite.open-lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
    guard openLock >= 0, flock(openLock, LOCK_EX) == 0 else {
        throw CocoaError(.fileLocking, userInfo: [NSFilePathErrorKey: container.path + "/settings.sqlite.open-lock"])
    }
    let database = try DatabasePool(path: container.path + "/settings.sqlite", configuration: configuration)
    try database.write { db in
        try db.execute(sql: "CREATE TABLE IF NOT EXISTS edit (id INTEGER PRIMARY KEY AUTOINCREMENT, author TEXT NOT NULL, n INTEGER NOT NULL)")
    }
    flock(openLock, LOCK_UN)
    close(openLock)
    let flags = try Wormhole(group: "group.com.example.settings", transiting: .coordinated, container: container)

    /// Told to sync: reload if (and only if) this side's flag is set, clearing it atomically, so a
    /// flag the peer sets meanwhile is never lost.
    @Sendable func syncIfNeeded() {
        var needed = false
        _ = try? flags.update("needSyncDatabase.\(role)", as: Bool.self) { flag in
            needed = flag ?? false
            flag = false
        }
        guard needed else { return }
        let count = (try? database.read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM edit WHERE author = ?", arguments: [peer])
        }) ?? nil
        peerLoaded.withLock { $0 = max($0, count ?? 0) }
        reloads.withLock { $0 += 1 }
        reloaded.signal()
    }
    let observation = try NotifyCenter.default.observe(changed, queue: DispatchQueue(label: "settings.reload")) { _ in syncIfNeeded() }
    syncIfNeeded() // edits made while this side was not running

    for n in 1 ... edits {
        try database.write { db in try db.execute(sql: "INSERT INTO edit (author, n) VALUES (?, ?)", arguments: [role, n]) }
        try flags.update("needSyncDatabase.\(peer)", as: Bool.self) { $0 = true }
        try NotifyCenter.default.post(changed)
    }
    // The peer's edits arrive by its notifications. The bound (30 s; SETTINGS_SYNC_WAIT seconds)
    // only guards against a peer that never ran, or never told us.
    let wait = ProcessInfo.processInfo.environment["SETTINGS_SYNC_WAIT"].flatMap(Double.init) ?? 30
    let deadline = Date().addingTimeInterval(wait)
    while peerLoaded.withLock({ $0 }) < edits, Date() < deadline { _ = reloaded.wait(timeout: .now() + 1) }
    observation.cancel()
    let authors = try database.read { db in
        try Row.fetchAll(db, sql: "SELECT author, COUNT(DISTINCT n) AS n FROM edit GROUP BY author ORDER BY author")
            .map { "\($0["author"] as String)=\($0["n"] as Int)" }
    }
    let total = edits + peerLoaded.withLock { $0 }
    print("\(role): loaded \(total) edits (\(authors.joined(separator: " "))) in \(reloads.withLock { $0 }) reloads")
    exit(total == peers * edits ? 0 : 1)
} catch {
    // An expected failure (a refused container, a locked database): say it and exit non-zero.
    FileHandle.standardError.write(Data("settings-sync: \(error)\n".utf8))
    exit(1)
}

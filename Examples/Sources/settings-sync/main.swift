// settings-sync: an app and its helper (the iOS ↔ watchOS `needSyncDatabase` handshake) share one
// SQLite database in their group container. Each side writes its edits with GRDB, sets the
// `needSyncDatabase` flag through a coordinated wormhole (an atomic read-modify-write across
// processes), and posts a Darwin notification; the other side reloads when told, clearing the
// flag. Run two at once: `settings-sync app DIR 50` and `settings-sync helper DIR 50`.
import DarwinNotify
import Dispatch
import Foundation
import GRDB
import Synchronization
import Wormhole

let arguments = CommandLine.arguments
guard arguments.count == 4, let edits = Int(arguments[3]), edits > 0 else {
    FileHandle.standardError.write(Data("usage: settings-sync ROLE CONTAINER-DIR EDITS\n".utf8))
    exit(64)
}
let role = arguments[1], directory = arguments[2]
let peers = 2 // the app and its helper, each making `edits` edits
let changed = "com.example.settings.changed"

let container = try GroupContainer(group: "group.com.example.settings", directory: directory)
// Both sides may open, and so create, the database at the same moment. Switching a new database
// to WAL takes a lock SQLite does not wait for, so the opening is serialised with flock(2) on a
// file beside it; afterwards SQLite's own locks (and a busy timeout) suffice.
var configuration = Configuration()
configuration.busyMode = .timeout(10)
let openLock = open(container.path + "/settings.sqlite.open-lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
guard openLock >= 0, flock(openLock, LOCK_EX) == 0 else { fatalError("cannot lock \(container.path): errno \(errno)") }
let database = try DatabasePool(path: container.path + "/settings.sqlite", configuration: configuration)
try database.write { db in
    try db.execute(sql: "CREATE TABLE IF NOT EXISTS edit (id INTEGER PRIMARY KEY AUTOINCREMENT, author TEXT NOT NULL, n INTEGER NOT NULL)")
}
flock(openLock, LOCK_UN)
close(openLock)
let flags = try Wormhole(group: "group.com.example.settings", transiting: .coordinated, container: container)

/// What this side has loaded: the number of edits in the database at its last reload.
let loaded = Mutex(0)
let reloaded = DispatchSemaphore(value: 0)
@Sendable func reload() {
    // Told to sync: clear the flag (atomically: a concurrent setter is never lost) and reload.
    _ = try? flags.update("needSyncDatabase", as: Bool.self) { $0 = false }
    let count = (try? database.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM edit") }) ?? 0
    loaded.withLock { $0 = max($0, count ?? 0) }
    reloaded.signal()
}
let observation = try NotifyCenter.default.observe(changed, queue: DispatchQueue(label: "settings.reload")) { _ in reload() }

for n in 1 ... edits {
    try database.write { db in try db.execute(sql: "INSERT INTO edit (author, n) VALUES (?, ?)", arguments: [role, n]) }
    try flags.update("needSyncDatabase", as: Bool.self) { $0 = true }
    try NotifyCenter.default.post(changed)
}

// Done editing: wait until a reload has seen both sides' edits (the other side's last post
// triggers it). The 30 s bound only guards against a peer that never ran.
let deadline = Date().addingTimeInterval(30)
while loaded.withLock({ $0 }) < peers * edits, Date() < deadline {
    if reloaded.wait(timeout: .now() + 1) == .timedOut { reload() } // a peer that finished before we observed
}
observation.cancel()
let authors = try database.read { db in
    try Row.fetchAll(db, sql: "SELECT author, COUNT(DISTINCT n) AS n FROM edit GROUP BY author ORDER BY author")
        .map { "\($0["author"] as String)=\($0["n"] as Int)" }
}
print("\(role): loaded \(loaded.withLock { $0 }) edits (\(authors.joined(separator: " ")))")
exit(loaded.withLock { $0 } == peers * edits ? 0 : 1)

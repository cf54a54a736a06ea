// State book: what a bridge knows of the states it carries, so that every host ends on the
// broker's last value (docs/BRIDGE.md, "State"). Plain data, no I/O: the bridge holds it under
// one lock and asks it, in one step each, whether a local value is news and whether a remote one
// came before our own.

struct StateBook {
    /// How long our own publication holds remote states back when its echo never comes (a
    /// lost connection).
    static let echoWait: UInt64 = 10_000_000_000

    /// The last value of each name the bridge published or set, so a change it made itself,
    /// seen again by the state watcher, is not published back.
    private var known: [String: UInt64] = [:]
    /// Our own publications the broker has not handed back yet, per name (for names we both
    /// export and import), with when the last was made. The broker hands every subscriber one
    /// topic's messages in the order it received them, so a remote state that arrives before
    /// our echo was received *before* ours: ours, later, wins there, and must win here too.
    private var unechoed: [String: (count: Int, since: UInt64)] = [:]
    /// The names whose state was imported (bounded by the bridge's `--state-limit`).
    private var imported: Set<String> = []

    var knownNames: [String] { Array(known.keys) }

    /// Records a local value; true when it must be published (it differs from the last known,
    /// or `always`). A tracked name then waits for its echo.
    mutating func recordLocal(_ name: String, _ value: UInt64, tracked: Bool, now: UInt64, always: Bool = false) -> Bool {
        if !always && (known[name] == value || (known[name] == nil && value == 0)) { return false }
        known[name] = value
        if tracked { unechoed[name] = ((unechoed[name]?.count ?? 0) + 1, now) }
        return true
    }

    /// Our own publication of `name` came back (or was dropped and never will).
    mutating func echoed(_ name: String) {
        guard let entry = unechoed[name] else { return }
        unechoed[name] = entry.count > 1 ? (entry.count - 1, entry.since) : nil
    }

    enum RemoteVerdict: Equatable {
        /// The broker received it before our own last value: ours wins, ignore it.
        case superseded
        /// A new name past the limit of imported names.
        case overLimit
        /// Recorded as known; the value known before, to set the file and to restore on failure.
        case recorded(previous: UInt64?)
    }

    mutating func recordRemote(_ name: String, _ value: UInt64, now: UInt64, limit: Int) -> RemoteVerdict {
        if let entry = unechoed[name] {
            if now &- entry.since <= Self.echoWait { return .superseded }
            unechoed[name] = nil
        }
        if !imported.contains(name) {
            guard imported.count < limit else { return .overLimit }
            imported.insert(name)
        }
        let previous = known[name]
        known[name] = value
        return .recorded(previous: previous)
    }

    /// Setting a recorded remote value failed: what was known before comes back, unless a
    /// later value was recorded since.
    mutating func restore(_ name: String, _ previous: UInt64?, ifStill value: UInt64) {
        guard known[name] == value else { return }
        known[name] = previous
    }
}

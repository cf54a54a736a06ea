// Reporter: what the bridge tells its operator, one line on stderr per event, prefixed
// `notify-bridge:` (journald keeps them). Repeated faults of one kind are summarised so a flood
// of bad messages cannot flood the log.
import Foundation
import Synchronization

public final class Reporter: Sendable {
    /// Kinds often carry a name or topic from the broker: the table is emptied when it reaches
    /// this size, so a flood of distinct bad topics cannot grow it without bound (forgetting a
    /// kind only means its next event is reported at once).
    public static let maxKinds = 1024
    private let lastSummary = Mutex<[String: (count: Int, at: UInt64)]>([:])
    private let write: @Sendable (String) -> Void

    /// Lines go to `write`; by default to stderr.
    public init(write: @escaping @Sendable (String) -> Void = { FileHandle.standardError.write(Data($0.utf8)) }) {
        self.write = write
    }

    public func say(_ line: String) { write("notify-bridge: " + line + "\n") }

    /// How many kinds of repeated events are remembered now.
    public var trackedKinds: Int { lastSummary.withLock { $0.count } }

    /// Reports the first event of `kind` at once, then at most one line a second with the count.
    public func repeated(_ kind: String, _ line: @autoclosure () -> String) {
        let now = DispatchTime.now().uptimeNanoseconds
        let count: Int? = lastSummary.withLock { table in
            if table[kind] == nil, table.count >= Reporter.maxKinds { table.removeAll() }
            var entry = table[kind] ?? (0, 0)
            entry.count += 1
            defer { table[kind] = entry }
            if entry.count == 1 || now - entry.at >= 1_000_000_000 {
                entry.at = now
                return entry.count
            }
            return nil
        }
        if let count { say(count == 1 ? line() : "\(line()) (\(count) so far)") }
    }
}

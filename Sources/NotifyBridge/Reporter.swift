// Reporter: what the bridge tells its operator, one line on stderr per event, prefixed
// `notify-bridge:` (journald keeps them). Repeated faults of one kind are summarised so a flood
// of bad messages cannot flood the log.
import Foundation
import Synchronization

public final class Reporter: Sendable {
    private let lastSummary = Mutex<[String: (count: Int, at: UInt64)]>([:])

    public init() {}

    public func say(_ line: String) {
        FileHandle.standardError.write(Data(("notify-bridge: " + line + "\n").utf8))
    }

    /// Reports the first event of `kind` at once, then at most one line a second with the count.
    public func repeated(_ kind: String, _ line: @autoclosure () -> String) {
        let now = DispatchTime.now().uptimeNanoseconds
        let count: Int? = lastSummary.withLock { table in
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

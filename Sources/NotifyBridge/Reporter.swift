// Reporter: what the bridge tells its operator, one line on stderr per event, prefixed
// `notify-bridge:` (journald keeps them). Repeated faults of one kind are summarised so a flood
// of bad messages cannot flood the log.
import Dispatch
import FoundationEssentials
import Glibc
import Synchronization
import SystemPackage

package final class Reporter: Sendable {
    /// Kinds often carry a name or topic from the broker: the table is emptied when it reaches
    /// this size, so a flood of distinct bad topics cannot grow it without bound (forgetting a
    /// kind only means its next event is reported at once).
    package static let maxKinds = 1024
    /// At most this many repeated-kind lines a second in all: a flood of distinct bad topics (each
    /// its own kind) would otherwise still print one line per message.
    package static let maxLinesPerSecond = 10
    private let lastSummary = Mutex<[String: (count: Int, at: UInt64)]>([:])
    private struct Window { var start: UInt64 = 0; var lines = 0; var suppressed = 0 }
    private let window = Mutex(Window())
    private let write: @Sendable (String) -> Void

    /// Lines go to `write`; by default to stderr.
    package init(write: @escaping @Sendable (String) -> Void = Reporter.standardError) {
        self.write = write
    }

    /// Writes `text` to stderr, all of it, unbuffered (a supervisor reads it line by line).
    package static let standardError: @Sendable (String) -> Void = { text in
        _ = try? Array(text.utf8).withUnsafeBytes { try FileDescriptor.standardError.writeAll($0) }
    }

    package func say(_ line: String) { write("notify-bridge: " + line + "\n") }

    /// How many kinds of repeated events are remembered now.
    package var trackedKinds: Int { lastSummary.withLock { $0.count } }

    /// Reports the first event of `kind` at once, then at most one line a second with the count.
    package func repeated(_ kind: String, _ line: @autoclosure () -> String) {
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
        guard let count else { return }
        // The global budget: past it, lines are counted, and the count is said once the second is over.
        let (allowed, suppressedBefore): (Bool, Int) = window.withLock { w in
            var before = 0
            if now - w.start >= 1_000_000_000 {
                before = w.suppressed
                w = Window(start: now)
            }
            guard w.lines < Reporter.maxLinesPerSecond else {
                w.suppressed += 1
                return (false, before)
            }
            w.lines += 1
            return (true, before)
        }
        if suppressedBefore > 0 { sayHowManySuppressed(suppressedBefore) }
        if allowed { say(count == 1 ? line() : "\(line()) (\(count) so far)") }
    }

    /// Says how many reports the budget held back and not yet said (at exit, or when a flood ends).
    package func flush() {
        let pending = window.withLock { w -> Int in defer { w.suppressed = 0 }; return w.suppressed }
        if pending > 0 { sayHowManySuppressed(pending) }
    }

    private func sayHowManySuppressed(_ count: Int) {
        say("\(count) more report\(count == 1 ? "" : "s") held back (more than \(Reporter.maxLinesPerSecond) a second); the counters have them all")
    }
}

import Foundation
import Testing

/// The helpers the integration suites wait with: a helper that misses what it waits for turns a
/// passing test into a 20-second timeout, so they are tested themselves (no process, no bus).
@Suite("Test helpers")
struct HelperTests {
    /// `done` may consume what it looks at (a notify_check token is true once per post):
    /// repeatUntil must act on the first true it gets, never ask again and lose it.
    @Test("repeatUntil returns on the first true of a done() that is true only once")
    func repeatUntilKeepsAConsumedTrue() throws {
        var calls = 0
        // True on the second call only: the first is the loop's entry test, the second comes
        // while it pauses between actions.
        try repeatUntil(timeout: 2, interval: 0.05, "a one-shot condition", action: {}, done: {
            calls += 1
            return calls == 2
        })
        #expect(calls == 2)
    }

    @Test("repeatUntil acts until done() holds, and fails after its timeout when it never does")
    func repeatUntilActsAndTimesOut() throws {
        var actions = 0
        try repeatUntil(timeout: 5, interval: 0.01, "three actions", action: { actions += 1 }, done: { actions >= 3 })
        #expect(actions == 3)
        #expect(throws: TestFailure.self) {
            try repeatUntil(timeout: 0.2, interval: 0.05, "never", action: {}, done: { false })
        }
    }

    /// A child starts as from a shell: no signal blocked, none of an application's ignored,
    /// whatever thread of the test runner (which blocks nearly all) starts it. (Signals 32 and 33
    /// are glibc's own, which no program can handle; the runner leaves them ignored.)
    @Test("a child process starts with no signal blocked and none of an application's ignored")
    func childrenStartWithAShellsSignals() throws {
        let status = try run("/bin/grep", ["-E", "^Sig(Blk|Ign):", "/proc/self/status"])
        let masks = Dictionary(uniqueKeysWithValues: status.out.split(separator: "\n").compactMap { line -> (String, UInt64)? in
            let parts = line.split(separator: "\t")
            guard parts.count == 2, let mask = UInt64(parts[1], radix: 16) else { return nil }
            return (String(parts[0]), mask)
        })
        let glibcs: UInt64 = 1 << 31 | 1 << 32 // signals 32 and 33 (bit n - 1 for signal n)
        #expect(masks["SigBlk:"] == 0, "\(status.out)")
        #expect(masks["SigIgn:"].map { $0 & ~glibcs } == 0, "\(status.out)")
    }
}

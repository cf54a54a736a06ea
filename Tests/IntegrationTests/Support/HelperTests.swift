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
}

import Testing
@testable import NotifyBridge

/// The bridge's state bookkeeping (StateBook): what makes every host end on the broker's last
/// value when two hosts set one name at once (docs/BRIDGE.md, "State").
@Suite("State book of the bridge")
struct StateBookTests {
    @Test("a local value is news once; 0 for a name never seen is not")
    func localNews() {
        var book = StateBook()
        let r1 = book.recordLocal("n", 0, tracked: false, now: 0)
        #expect(!r1)
        let r2 = book.recordLocal("n", 5, tracked: false, now: 0)
        #expect(r2)
        let r3 = book.recordLocal("n", 5, tracked: false, now: 1)
        #expect(!r3)
        let r4 = book.recordLocal("n", 5, tracked: false, now: 1, always: true)
        #expect(r4)
    }

    @Test("a remote value arriving while our own publication is unechoed is superseded; after the echo it is recorded")
    func ordering() {
        var book = StateBook()
        let r5 = book.recordLocal("n", 71, tracked: true, now: 0)
        #expect(r5)
        let r6 = book.recordRemote("n", 72, now: 1, limit: 10)
        #expect(r6 == .superseded)
        book.echoed("n")
        let r7 = book.recordRemote("n", 73, now: 2, limit: 10)
        #expect(r7 == .recorded(previous: 71))
        // Recorded as known: the watcher seeing our own write of 73 finds nothing new.
        let r8 = book.recordLocal("n", 73, tracked: true, now: 3)
        #expect(!r8)
    }

    @Test("two publications need two echoes; an echo that never comes stops holding back after echoWait")
    func echoes() {
        var book = StateBook()
        let r9 = book.recordLocal("n", 1, tracked: true, now: 0)
        #expect(r9)
        let r10 = book.recordLocal("n", 2, tracked: true, now: 0)
        #expect(r10)
        book.echoed("n")
        let r11 = book.recordRemote("n", 9, now: 1, limit: 10)
        #expect(r11 == .superseded)
        let r12 = book.recordRemote("n", 9, now: StateBook.echoWait + 1, limit: 10)
        #expect(r12 == .recorded(previous: 2))
    }

    @Test("new names past the limit are refused, known ones still recorded; a failed set restores only its own value")
    func limitAndRestore() {
        var book = StateBook()
        let r13 = book.recordRemote("a", 1, now: 0, limit: 1)
        #expect(r13 == .recorded(previous: nil))
        let r14 = book.recordRemote("b", 1, now: 0, limit: 1)
        #expect(r14 == .overLimit)
        let r15 = book.recordRemote("a", 2, now: 0, limit: 1)
        #expect(r15 == .recorded(previous: 1))
        book.restore("a", 1, ifStill: 2)
        let r16 = book.recordLocal("a", 1, tracked: false, now: 0)
        #expect(!r16)
        let r17 = book.recordRemote("a", 3, now: 0, limit: 1)
        #expect(r17 == .recorded(previous: 1))
        book.restore("a", 1, ifStill: 2) // 3 was recorded since: kept
        let r18 = book.recordLocal("a", 3, tracked: false, now: 0)
        #expect(!r18)
    }
}

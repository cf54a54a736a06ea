import DarwinNotifyFoundation
import Foundation
import MMWormhole
import Testing

/// MMWormhole's calls cannot fail on iOS and return nothing: here what fails is reported
/// (NotificationFailures), nothing is thrown, nothing crashes. Messages across processes:
/// Tests/AppleStyle (wormhole-pair).
@Suite("MMWormhole (no bus, no container)")
struct MMWormholeTests {
    @Test("a group that is no group: every call reports, returns nil, and does not crash")
    func invalidGroup() {
        let before = NotificationFailures.count
        let wormhole = MMWormhole(applicationGroupIdentifier: "../not a group", optionalDirectory: nil)
        wormhole.passMessageObject("x" as NSString, identifier: "id")
        #expect(wormhole.message(withIdentifier: "id") == nil)
        wormhole.listenForMessage(withIdentifier: "id") { _ in Issue.record("a listener of an unusable wormhole ran") }
        wormhole.clearAllMessageContents()
        // The constructor, then pass, message, listen and clearAll: five reports at least (other
        // suites may report at the same time).
        #expect(NotificationFailures.count >= before + 5)
    }

    @Test("WatchConnectivity transiting: there is no watch; the wormhole passes nothing and says so")
    func sessionTransiting() {
        let before = NotificationFailures.count
        let wormhole = MMWormhole(applicationGroupIdentifier: "group.example", optionalDirectory: "w", transitingType: .sessionContext)
        wormhole.passMessageObject("x" as NSString, identifier: "id")
        #expect(wormhole.message(withIdentifier: "id") == nil)
        #expect(NotificationFailures.count >= before + 3)
    }
}

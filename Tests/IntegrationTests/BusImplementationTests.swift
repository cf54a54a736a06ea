import Foundation
import Testing

/// Which bus the suites run on: dbus-daemon, or dbus-broker in the dbus-broker lane (.ci/broker),
/// so a lane that silently fell back to dbus-daemon fails instead of passing for the wrong bus.
extension IntegrationSuites {
    @Suite("The bus under test")
    struct BusImplementationTests {
        @Test("the test bus is dbus-broker in the dbus-broker lane, dbus-daemon otherwise")
        func implementation() throws {
            let bus = try TestBus()
            let reply = try run("/usr/bin/dbus-send", ["--bus=\(bus.address)", "--print-reply", "--dest=org.freedesktop.DBus", "/",
                                                       "org.freedesktop.DBus.Peer.GetMachineId"])
            #expect(reply.status == 0, "\(reply.err)")
            // The lane's controller starts dbus-broker with this machine id; dbus-daemon reports the machine's.
            let brokerLane = !(ProcessInfo.processInfo.environment["DARWIN_NOTIFY_TEST_BROKER_CONTROLLER"] ?? "").isEmpty
            #expect(reply.out.contains("0123456789abcdef0123456789abcdef") == brokerLane, "\(reply.out)")
        }
    }
}

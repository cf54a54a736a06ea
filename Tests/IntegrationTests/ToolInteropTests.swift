import Foundation
import Testing

/// The wire contract of docs/PROTOCOL.md, checked with the stock D-Bus tools.
extension IntegrationSuites {
    @Suite("Interoperability with dbus-send, gdbus and dbus-monitor", .serialized)
    struct ToolInteropTests {
        let bus: TestBus
        init() throws { bus = try TestBus() }

        @Test("dbus-send posts a notification that notifyutil -w sees")
        func dbusSendToNotifyutil() throws {
            let waiter = try ChildProcess("notifyutil", ["-1", "from.dbus-send"], environment: bus.environment)
            try repeatUntil("notifyutil to see the dbus-send signal", action: {
                let r = try run("/usr/bin/dbus-send", ["--bus=\(bus.address)", "--type=signal", "/org/darwinnotify",
                                                       "org.darwinnotify.Notify.Post", "string:from.dbus-send"])
                #expect(r.status == 0, "dbus-send: \(r.err)")
            }, done: { !waiter.isRunning })
            #expect(try waiter.waitForExit() == 0)
            #expect(waiter.lines == ["from.dbus-send"])
        }

        @Test("gdbus emit posts a notification that notifyutil -w sees")
        func gdbusEmitToNotifyutil() throws {
            let waiter = try ChildProcess("notifyutil", ["-1", "from.gdbus"], environment: bus.environment)
            try repeatUntil("notifyutil to see the gdbus signal", action: {
                // gdbus --address makes a peer connection (no Hello); --session registers on the bus.
                let r = try run("/usr/bin/gdbus", ["emit", "--session", "--object-path", "/org/darwinnotify",
                                                   "--signal", "org.darwinnotify.Notify.Post", "'from.gdbus'", "uint64 7"],
                                environment: ["DBUS_SESSION_BUS_ADDRESS": bus.address])
                #expect(r.status == 0, "gdbus: \(r.err)")
            }, done: { !waiter.isRunning })
            #expect(try waiter.waitForExit() == 0)
            #expect(waiter.lines == ["from.gdbus"])
        }

        @Test("dbus-monitor shows every notifyutil -p as a Post signal")
        func notifyutilToDbusMonitor() throws {
            let monitor = try ChildProcess("/usr/bin/dbus-monitor", ["--address", bus.address,
                                                                     "type='signal',path='/org/darwinnotify'"])
            // Its name and its number: dbus-monitor writes each line of a message by itself.
            try repeatUntil("dbus-monitor to show the post", action: { try notifyutilPost(["seen.by.monitor"], bus: bus) },
                            done: { monitor.stdout.contains("string \"seen.by.monitor\"\n   uint64 ") })
            let out = monitor.stdout
            // Our posters use the name's bucket interface (docs/PROTOCOL.md).
            #expect(out.contains("path=/org/darwinnotify; interface=\(bucketInterface("seen.by.monitor")); member=Post"), "\(out)")
            #expect(out.contains("uint64 "))
        }
    }
}

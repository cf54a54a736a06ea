import CNotify
import DarwinNotify
import Foundation
import Testing

/// Bad input gets a clear error — a status, a thrown error, or a message and a non-zero exit.
extension IntegrationSuites {
    @Suite("Bad input", .serialized)
    struct BadInputTests {
        let bus: TestBus
        init() throws { bus = try TestBus() }

        @Test("names: empty, over 512 bytes, invalid UTF-8, NULL")
        func badNames() throws {
            let center = try NotifyCenter(bus: bus.address)
            #expect(throws: NotifyError.self) { try center.post("") }
            let tooLong = expectError(NotifyError.Code.invalidName) { () throws(NotifyError) in try center.post(String(repeating: "n", count: 513)) }
            #expect(tooLong?.message.contains("512") == true)
            try center.post(String(repeating: "n", count: 512)) // the limit itself is fine
            let invalidUTF8: [CChar] = [0x61, -1, -2, 0]
            #expect(CNotify_center_post(center.cCenter, invalidUTF8) == UInt32(NOTIFY_STATUS_INVALID_NAME))
            #expect(String(cString: CNotify_last_error()).contains("UTF-8"))
            #expect(notify_post(nil) == UInt32(NOTIFY_STATUS_INVALID_NAME)) // as Libnotify's notify_client.c
            #expect(notify_register_check("x", nil) == UInt32(NOTIFY_STATUS_NULL_INPUT))
            var check: Int32 = 0
            #expect(notify_check(123_456, &check) == UInt32(NOTIFY_STATUS_INVALID_TOKEN))
            #expect(notify_check(0, nil) == UInt32(NOTIFY_STATUS_NULL_INPUT))
            #expect(notify_cancel(123_456) == UInt32(NOTIFY_STATUS_INVALID_TOKEN))
            #expect(!notify_is_valid_token(NOTIFY_TOKEN_INVALID))
        }

        @Test("notifyutil: empty and oversized names, unknown options, missing operands")
        func notifyutilBadArguments() throws {
            for (args, needle) in [(["-p", ""], "Invalid Name"),
                                   (["-p", String(repeating: "k", count: 600)], "512"),
                                   (["-x"], "unrecognized option"),
                                   (["-p"], "name required"),
                                   (["-z", "abc", "-p", "k"], "-z abc is invalid")] {
                let r = try run("notifyutil", args, environment: bus.environment)
                #expect(r.status != 0, "\(args)")
                #expect(r.err.contains(needle), "\(args): \(r.err)")
            }
        }

        @Test("an unreachable bus address and a malformed DARWIN_NOTIFY_BUS")
        func badBus() throws {
            let unreachable = try run("notifyutil", ["--bus", "unix:path=/nonexistent/darwin-notify/bus", "-p", "k"])
            #expect(unreachable.status != 0)
            #expect(unreachable.err.contains("cannot reach the bus"), "\(unreachable.err)")

            let malformed = try run("notifyutil", ["-p", "k"], environment: ["DARWIN_NOTIFY_BUS": "not-an-address"])
            #expect(malformed.status != 0)
            #expect(malformed.err.contains("DARWIN_NOTIFY_BUS 'not-an-address' is not a D-Bus address"), "\(malformed.err)")

            #expect(throws: NotifyError.self) { _ = try NotifyCenter(bus: "nonsense") }
            let center = try NotifyCenter(bus: "unix:path=/nonexistent/bus")
            expectError(NotifyError.Code.serverNotFound, "(post to an unreachable bus)") { () throws(NotifyError) in try center.post("k") }
        }

        @Test("dbus-daemon not installed: the message names the package to install")
        func daemonMissing() throws {
            let runtime = try makeTemporaryDirectory("nodaemon")
            chmod(runtime, 0o700)
            let r = try run(ChildProcess.productsDirectory + "/notifyutil", ["-p", "k"],
                            environment: ["PATH": "/nonexistent", "XDG_RUNTIME_DIR": runtime], replaceEnvironment: true)
            #expect(r.status != 0)
            #expect(r.err.contains("dbus-daemon is not installed"), "\(r.err)")
            #expect(r.err.contains("apt-get install dbus-daemon"), "\(r.err)")
        }

        @Test("unsafe runtime directories are refused: writable by others, a symlink, another owner")
        func unsafeRuntimeDirectory() throws {
            let runtime = try makeTemporaryDirectory("unsafe")
            chmod(runtime, 0o700)
            let dir = runtime + "/darwin-notify"
            let env = ["XDG_RUNTIME_DIR": runtime, "DARWIN_NOTIFY_BUS": ""]

            mkdir(dir, 0o700)
            chmod(dir, 0o777)
            var r = try run("notifyutil", ["-p", "k"], environment: env)
            #expect(r.status != 0)
            #expect(r.err.contains("others can write"), "\(r.err)")
            rmdir(dir)

            let elsewhere = try makeTemporaryDirectory("target")
            symlink(elsewhere, dir)
            r = try run("notifyutil", ["-p", "k"], environment: env)
            #expect(r.status != 0)
            #expect(r.err.contains("symbolic link"), "\(r.err)")
            unlink(dir)

            if geteuid() == 0 { // only root can hand a directory to another user
                mkdir(dir, 0o700)
                chown(dir, 65534, 65534)
                r = try run("notifyutil", ["-p", "k"], environment: env)
                #expect(r.status != 0)
                #expect(r.err.contains("owned by uid 65534"), "\(r.err)")
            }
        }
    }
}

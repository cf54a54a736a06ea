import CNotify
import Testing

/// `notify_register_mach_port` and `mach_port_t` as Apple's code spells them (issue 33 item 5):
/// they compile on Linux, and the call fails cleanly at run time (no Mach ports), with the status
/// a program can branch on, so code with a port path takes its other path.
@Suite("notify_register_mach_port on Linux")
struct MachPortTests {
    @Test("a registration fails with NOTIFY_STATUS_INVALID_PORT, registers nothing, leaves the port as it was and the token invalid")
    func failsCleanly() {
        var port: mach_port_t = MACH_PORT_NULL
        var token: Int32 = 1234
        let status = notify_register_mach_port("com.example.port", &port, 0, &token)
        #expect(status == UInt32(NOTIFY_STATUS_INVALID_PORT))
        #expect(port == MACH_PORT_NULL && token == NOTIFY_TOKEN_INVALID)
        #expect(String(cString: CNotify_last_error()).contains("no Mach ports on Linux"))
        #expect(!notify_is_valid_token(token))
    }

    @Test("bad input as Libnotify answers it: the name first, then a NULL port (INVALID_PORT), then the token pointer")
    func badInput() {
        var port: mach_port_t = MACH_PORT_NULL
        var token: Int32 = 0
        #expect(notify_register_mach_port(nil, nil, 0, &token) == UInt32(NOTIFY_STATUS_INVALID_NAME))
        #expect(notify_register_mach_port("com.example.port", nil, 0, &token) == UInt32(NOTIFY_STATUS_INVALID_PORT))
        #expect(notify_register_mach_port("com.example.port", &port, 0, nil) == UInt32(NOTIFY_STATUS_NULL_INPUT))
        #expect(notify_register_mach_port("", &port, 0, &token) == UInt32(NOTIFY_STATUS_INVALID_NAME))
    }

    @Test("<notify_keys.h> comes with the module: Apple's key names")
    func keys() {
        #expect(kNotifyClockSet == "com.apple.system.clock_set")
        #expect(kNotifyTimeZoneChange == "com.apple.system.timezone")
        #expect(kNotifySCNetworkChange == "com.apple.system.config.network_change")
        #expect(kNotifyVFSMount == "com.apple.system.kernel.mount")
    }
}

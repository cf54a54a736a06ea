import CNotify
import Testing

/// Pure parts of the hardening work, checked without a bus.
@Suite("Hardening: addresses and names")
struct HardeningUnitTests {
    @Test("a guid is dropped from the address, so a restarted daemon is reached again", arguments: [
        ("unix:path=/tmp/x/bus,guid=0123456789abcdef0123456789abcdef", "unix:path=/tmp/x/bus"),
        ("unix:guid=0123456789abcdef0123456789abcdef,path=/tmp/x/bus", "unix:path=/tmp/x/bus"),
        ("unix:path=/a,guid=1;unix:abstract=/b,guid=2", "unix:path=/a;unix:abstract=/b"),
        ("unix:path=/tmp/x/bus", "unix:path=/tmp/x/bus"),
    ])
    func guidIsDropped(address: String, expected: String) throws {
        var status: UInt32 = 99
        let center = try #require(CNotify_center_create(address, &status))
        defer { CNotify_center_destroy(center) }
        #expect(status == 0)
        #expect(String(cString: CNotify_center_bus_address(center)) == expected)
    }

    @Test("user.uid.N with N past the uid range is nobody's, root included", arguments: [
        "user.uid.18446744073709617150", "user.uid.4294967295", "user.uid.99999999999999999999999.x",
    ])
    func uidOutOfRange(name: String) throws {
        var status: UInt32 = 99
        let center = try #require(CNotify_center_create("unix:path=/nonexistent/bus", &status))
        defer { CNotify_center_destroy(center) }
        // Refused before any bus is needed (this one does not exist).
        #expect(CNotify_center_post(center, name) == UInt32(NOTIFY_STATUS_NOT_AUTHORIZED))
        #expect(String(cString: CNotify_last_error()).contains("not a uid"))
        #expect(CNotify_center_set_state(center, name, 1) == UInt32(NOTIFY_STATUS_NOT_AUTHORIZED))
    }
}

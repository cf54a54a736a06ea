import CNotify
import DarwinNotify
import Testing

@Suite("NotifyError")
struct NotifyErrorTests {
    @Test("every named code has Apple's value from notify.h", arguments: [
        (NotifyError.Code.invalidName, NOTIFY_STATUS_INVALID_NAME), (.invalidToken, NOTIFY_STATUS_INVALID_TOKEN),
        (.invalidPort, NOTIFY_STATUS_INVALID_PORT), (.invalidFile, NOTIFY_STATUS_INVALID_FILE),
        (.invalidSignal, NOTIFY_STATUS_INVALID_SIGNAL), (.invalidRequest, NOTIFY_STATUS_INVALID_REQUEST),
        (.notAuthorized, NOTIFY_STATUS_NOT_AUTHORIZED), (.optionDisabled, NOTIFY_STATUS_OPT_DISABLE),
        (.serverNotFound, NOTIFY_STATUS_SERVER_NOT_FOUND), (.nullInput, NOTIFY_STATUS_NULL_INPUT),
        (.failed, NOTIFY_STATUS_FAILED),
    ])
    func codeValues(code: NotifyError.Code, status: Int32) {
        #expect(code.rawValue == UInt32(status))
        #expect(!code.description.isEmpty)
    }

    @Test("descriptions are Apple's names")
    func names() {
        #expect(NotifyError.Code.invalidName.description == "Invalid Name")
        #expect(NotifyError.Code.serverNotFound.description == "Server Not Found")
        #expect(NotifyError(code: .nullInput, message: "x is NULL").description == "Null Input: x is NULL")
    }

    @Test("name validation needs no bus")
    func validation() {
        #expect(CNotify_validate_name(nil) == UInt32(NOTIFY_STATUS_INVALID_NAME)) // Libnotify's answer
        #expect(CNotify_validate_name("") == UInt32(NOTIFY_STATUS_INVALID_NAME))
        #expect(CNotify_validate_name(String(repeating: "a", count: 513)) == UInt32(NOTIFY_STATUS_INVALID_NAME))
        #expect(CNotify_validate_name(String(repeating: "a", count: 512)) == UInt32(NOTIFY_STATUS_OK))
        #expect(CNotify_validate_name("com.example.é") == UInt32(NOTIFY_STATUS_OK))
        let bad: [CChar] = [0x61, -0x3f, 0] // 0x61 0xC1: an invalid UTF-8 lead byte
        #expect(CNotify_validate_name(bad) == UInt32(NOTIFY_STATUS_INVALID_NAME))
        #expect(NOTIFY_TOKEN_INVALID == -1)
    }
}

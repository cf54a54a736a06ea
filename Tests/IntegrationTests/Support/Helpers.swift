import Foundation

/// Posts through the real `notifyutil` CLI, as another process would.
func notifyutilPost(_ names: [String], bus: TestBus) throws {
    let args = ["-z", "0"] + names.flatMap { ["-p", $0] }
    let result = try run("notifyutil", args, environment: bus.environment)
    guard result.status == 0 else { throw TestFailure("notifyutil \(args) failed (\(result.status)): \(result.err)") }
}

/// For children with no readiness line (notifyutil -N, dbus-monitor): act every `interval`
/// until `done()` holds, failing loudly after `timeout`. Returns on the first true: `done` may
/// consume what it looks at (`notify_check` is true once per post), so it is never asked again.
func repeatUntil(timeout: TimeInterval = 20, interval: TimeInterval = 0.1, _ what: String,
                 action: () throws -> Void, done: () -> Bool) throws {
    let deadline = Date().addingTimeInterval(timeout)
    while !done() {
        if Date() > deadline { throw TestFailure("timed out after \(timeout) s: \(what)") }
        try action()
        let pause = Date().addingTimeInterval(interval)
        while Date() < pause {
            if done() { return }
            usleep(10_000)
        }
    }
}

/// The bucket interface of a name, computed from docs/PROTOCOL.md independently of the C core.
func bucketInterface(_ name: String) -> String {
    var h: UInt32 = 2_166_136_261
    for byte in name.utf8 { h = (h ^ UInt32(byte)) &* 16_777_619 }
    let hex = String(h & 0xfff, radix: 16)
    return "org.darwinnotify.Notify.H" + String(repeating: "0", count: 3 - hex.count) + hex
}

/// The text of a NUL-terminated C buffer a C call filled.
func cString(_ chars: [CChar]) -> String {
    String(decoding: chars.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

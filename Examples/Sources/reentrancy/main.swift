// reentrancy: the same code, a handler that re-posts its own name until a counter reaches 10,
// with a Darwin notification center and with Foundation's NotificationCenter. A Darwin post made
// inside a handler is delivered after the handler returns (never nested), so the handler sees
// 1, 2, … 10 each starting and ending in turn; NotificationCenter calls observers synchronously,
// so its handlers nest ten deep and end in reverse.
import DarwinNotify
import Dispatch
import Foundation
import Synchronization

let name = "com.example.reentrancy"

print("DarwinNotify:")
let counter = Mutex(0)
let finished = DispatchSemaphore(value: 0)
let center = NotifyCenter.default
do {
    let observation = try center.observe(name, queue: nil) { _ in
        let n = counter.withLock { $0 += 1; return $0 }
        print("  begin \(n)")
        if n < 10 { try? center.post(name) } else { finished.signal() }
        print("  end \(n)")
    }
    try center.post(name)
    guard finished.wait(timeout: .now() + 20) == .success else { print("no delivery"); exit(1) }
    observation.cancel()
} catch {
    FileHandle.standardError.write(Data("reentrancy: \(error)\n".utf8)) // no bus, say: said, not a crash
    exit(1)
}

print("NotificationCenter:")
let depth = Mutex(0)
let foundation = NotificationCenter()
let token = foundation.addObserver(forName: Notification.Name(name), object: nil, queue: nil) { _ in
    let n = depth.withLock { $0 += 1; return $0 }
    print("  begin \(n)")
    if n < 10 { foundation.post(name: Notification.Name(name), object: nil) }
    print("  end \(n)")
}
foundation.post(name: Notification.Name(name), object: nil)
foundation.removeObserver(token)

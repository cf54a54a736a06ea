// distributed-pair: DistributedNotificationCenter as macOS code uses it: a block observer with a
// nil queue (the main thread), userInfo numbers cast as on macOS, notifications(named:), a post
// with deliverImmediately. Nothing here throws, as nothing does on macOS.
//   distributed-pair observe   prints "ready", then one line per notification, then exits
//   distributed-pair post      posts the settings change and the "done" notification
import Foundation
#if os(Linux)
import DarwinNotifyFoundation
#endif

setvbuf(stdout, nil, _IOLBF, 0) // each line out at once: the other process waits for it

let changed = Notification.Name("com.example.applestyle.changed")
let done = Notification.Name("com.example.applestyle.done")
let center = DistributedNotificationCenter.default()

switch CommandLine.arguments.dropFirst().first {
case "post":
    center.postNotificationName(changed, object: "prefs",
                                userInfo: ["count": 3, "ratio": 0.5, "enabled": true, "title": "Settings"],
                                deliverImmediately: true)
    center.post(name: done, object: "prefs", userInfo: nil, deliverImmediately: true)
    exit(0)
case "observe":
    let observer = center.addObserver(forName: changed, object: "prefs", queue: nil) { note in
        let info = note.userInfo ?? [:]
        // On macOS these are NSNumbers: an integer reads as Double, a Double as Float, a Bool as Int.
        let count = info["count"] as? Double
        let ratio = info["ratio"] as? Float
        let enabled = info["enabled"] as? Int
        let title = info["title"] as? String
        print("changed main=\(Thread.isMainThread) count=\(count.map { "\($0)" } ?? "nil") ratio=\(ratio.map { "\($0)" } ?? "nil") enabled=\(enabled.map { "\($0)" } ?? "nil") title=\(title ?? "nil")")
    }
    let doneNotifications = center.notifications(named: done)
    Task {
        for await note in doneNotifications {
            // On the main thread, after what the block observer has queued there.
            await MainActor.run {
                print("done object=\(note.object as? String ?? "nil")")
                center.removeObserver(observer)
                exit(0)
            }
        }
    }
    // Both registrations are in place once this line is out (they are made before it).
    print("ready")
    RunLoop.main.run()
default:
    exit(64)
}


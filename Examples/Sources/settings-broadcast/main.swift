// settings-broadcast: a settings change sent to every interested process with its details in a
// userInfo (DistributedNotificationCenter). The listener suspends delivery while it is "busy":
// with `.coalesce`, the changes made meanwhile arrive as one, the latest, when it resumes.
//
//   settings-broadcast listen 5    waits for 5 changes while suspended, then resumes
//   settings-broadcast change 5    posts 5 changes (theme-1 … theme-5, size 11 … 15), then "done"
import DarwinNotifyFoundation
import Foundation
import Synchronization

let changed = Notification.Name("com.example.settings.changed")
let finished = Notification.Name("com.example.settings.done")
let arguments = CommandLine.arguments
guard arguments.count == 3, let count = Int(arguments[2]), count > 0, ["listen", "change"].contains(arguments[1]) else {
    FileHandle.standardError.write(Data("usage: settings-broadcast listen|change COUNT\n".utf8))
    exit(64)
}
let center = DistributedNotificationCenter.default()

do {
    if arguments[1] == "change" {
        for i in 1...count {
            try center.postNotificationName(changed, object: "prefs", userInfo: ["theme": "theme-\(i)", "size": 10 + i],
                                            deliverImmediately: false)
        }
        try center.postNotificationName(finished, object: "prefs", userInfo: nil, deliverImmediately: false)
        print("posted \(count) changes")
        exit(0)
    }

    let delivered = Mutex<[String]>([])
    let done = DispatchSemaphore(value: 0)
    let onChange = try center.addObserver(forName: changed, object: "prefs", suspensionBehavior: .coalesce, queue: nil) { note in
        let theme = note.userInfo?["theme"] as? String ?? "?", size = note.userInfo?["size"] as? Int ?? 0
        delivered.withLock { $0.append("theme=\(theme) size=\(size)") }
    }
    // Held, not coalesced: it comes after whatever the changes left, in order.
    let onDone = try center.addObserver(forName: finished, object: "prefs", suspensionBehavior: .hold, queue: nil) { _ in
        done.signal()
    }
    center.suspended = true // busy: changes are coalesced until we resume
    FileHandle.standardOutput.write(Data("listening (suspended)\n".utf8)) // unbuffered: others wait for it
    // The center counts what reached it while suspended; once everything has, resume.
    while center.statistics.delivered < UInt64(count + 1) { usleep(10_000) }
    center.suspended = false
    done.wait()
    for line in delivered.withLock({ $0 }) { print(line) }
    print("\(delivered.withLock { $0.count }) delivered for \(count) changes")
    center.removeObserver(onChange)
    center.removeObserver(onDone)
} catch {
    FileHandle.standardError.write(Data("settings-broadcast: \(error)\n".utf8))
    exit(1)
}

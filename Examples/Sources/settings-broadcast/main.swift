// settings-broadcast: a settings change sent to every interested process with its details in a
// userInfo (DistributedNotificationCenter). The listener suspends delivery while it is "busy":
// with `.coalesce`, the changes made meanwhile arrive as one, the latest, when it resumes.
//
//   settings-broadcast listen 5    waits for 5 changes while suspended, then resumes
//   settings-broadcast change 5    posts 5 changes (theme-1 … theme-5, size 11 … 15), then "done"
import DarwinNotifyFoundation
import Foundation

let changed = Notification.Name("com.example.settings.changed")
let finished = Notification.Name("com.example.settings.done")
let arguments = CommandLine.arguments
guard arguments.count == 3, let count = Int(arguments[2]), count > 0, ["listen", "change"].contains(arguments[1]) else {
    FileHandle.standardError.write(Data("usage: settings-broadcast listen|change COUNT\n".utf8))
    exit(64)
}
let center = DistributedNotificationCenter.default()

if arguments[1] == "change" {
    for i in 1...count {
        center.postNotificationName(changed, object: "prefs", userInfo: ["theme": "theme-\(i)", "size": 10 + i],
                                    deliverImmediately: false)
    }
    center.postNotificationName(finished, object: "prefs", userInfo: nil, deliverImmediately: false)
    // Posting cannot throw, as on macOS; a failure (no bus) is counted and reported.
    guard center.failureCount == 0 else { exit(1) }
    print("posted \(count) changes")
    exit(0)
}

// Observers with a nil queue run on the main thread, as on macOS: the main thread runs the main
// queue (dispatchMain, at the end), and the waiting is done on another thread.
var delivered: [String] = [] // touched on the main thread only
let onChange = center.addObserver(forName: changed, object: "prefs", suspensionBehavior: .coalesce, queue: nil) { note in
    let theme = note.userInfo?["theme"] as? String ?? "?", size = note.userInfo?["size"] as? Int ?? 0
    MainActor.assumeIsolated { delivered.append("theme=\(theme) size=\(size)") }
}
// Held, not coalesced: it comes after whatever the changes left, in order.
let onDone = center.addObserver(forName: finished, object: "prefs", suspensionBehavior: .hold, queue: nil) { _ in
    MainActor.assumeIsolated {
        for line in delivered { print(line) }
        print("\(delivered.count) delivered for \(count) changes")
        center.removeObserver(onChange)
        center.removeObserver(onDone)
        exit(0)
    }
}
center.suspended = true // busy: changes are coalesced until we resume
FileHandle.standardOutput.write(Data("listening (suspended)\n".utf8)) // unbuffered: others wait for it
// The center counts what reached it while suspended; once everything has, resume.
Thread.detachNewThread {
    while center.statistics.delivered < UInt64(count + 1) { usleep(10_000) }
    center.suspended = false
}
dispatchMain()

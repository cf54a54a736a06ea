// refresh-on-post: a job that darwin-notifyd's launcher starts when a name it declared is posted
// (Examples/launch.d/com.example.refresh.conf, darwin-notify-launch(5)), as launchd starts a job
// on its LaunchEvents. It checks in first thing, refreshes its cache file for each event (here:
// writes what it was told and when), and exits once no event came for two seconds: nothing sits
// idle, and the next post starts it again.
//
//   refresh-on-post CACHE-FILE
import DarwinNotify
import Dispatch
import Foundation
import Synchronization

guard CommandLine.arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: refresh-on-post CACHE-FILE (run by darwin-notifyd's launcher)\n".utf8))
    exit(64)
}
let cache = CommandLine.arguments[1]
let arrived = DispatchSemaphore(value: 0)
let refreshed = Mutex(0)

do {
    try LaunchEvents.checkIn { event in
        let n = refreshed.withLock { $0 += 1; return $0 }
        let text = "refresh \(n): \(event.name) (\(event.count) post\(event.count == 1 ? "" : "s"), event \(event.serial)) at \(Date())\n"
        let handle = FileHandle(forWritingAtPath: cache)
            ?? (FileManager.default.createFile(atPath: cache, contents: nil) ? FileHandle(forWritingAtPath: cache) : nil)
        if let handle {
            handle.seekToEndOfFile()
            handle.write(Data(text.utf8))
            try? handle.close()
        } else {
            FileHandle.standardError.write(Data("refresh-on-post: cannot write \(cache)\n".utf8))
        }
        print(text, terminator: "")
        arrived.signal()
    }
} catch {
    // Not started by the launcher, or no launcher: said, not a crash.
    FileHandle.standardError.write(Data("refresh-on-post: cannot check in: \(error)\n".utf8))
    exit(1)
}
// Idle for two seconds: done until the next post starts it again.
while arrived.wait(timeout: .now() + 2) == .success {}
print("refresh-on-post: idle, exiting after \(refreshed.withLock { $0 }) refresh(es)")

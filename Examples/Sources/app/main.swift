// app: the app side of `share-extension`. A named listener ("app") of a `queue` wormhole gets
// every item passed while the app was not running, in order, then each new one; its cursor is
// kept in the container, so the next start resumes after the last item it handled.
import Dispatch
import Foundation
import Synchronization
import Wormhole

struct SharedItem: Codable, Sendable {
    let index: Int
    let title: String
}

let arguments = CommandLine.arguments
guard arguments.count == 3, let expected = Int(arguments[2]), expected > 0 else {
    FileHandle.standardError.write(Data("usage: app CONTAINER-DIR COUNT\n".utf8))
    exit(64)
}
do {
    let container = try GroupContainer(group: "group.com.example.share", directory: arguments[1])
    let inbox = try Wormhole(group: "group.com.example.share", transiting: .queue, container: container)
    let received = Mutex(0)
    let done = DispatchSemaphore(value: 0)
    let listener = try inbox.listen(for: "shared-items", as: SharedItem.self, name: "app") { result in
        switch result {
        case .success(let item):
            print("\(item.index): \(item.title)")
            if received.withLock({ $0 += 1; return $0 }) == expected { done.signal() }
        case .failure(let error):
            FileHandle.standardError.write(Data("app: \(error)\n".utf8))
        }
    }
    guard done.wait(timeout: .now() + 30) == .success else {
        FileHandle.standardError.write(Data("app: got \(received.withLock { $0 }) of \(expected) items\n".utf8))
        exit(1)
    }
    listener.cancelAndWait() // saves the cursor: a restart resumes after the last item
} catch {
    // An expected failure (a refused container, another process listening as "app"): say it.
    FileHandle.standardError.write(Data("app: \(error)\n".utf8))
    exit(1)
}

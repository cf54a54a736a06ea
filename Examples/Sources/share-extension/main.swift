// share-extension: what a share extension does with the items a user shares: it passes each one,
// as a Codable value, through a `queue` wormhole, whether or not the app is running. The app
// (`app`) receives every item, in order, when it next starts.
import Foundation
import Wormhole

struct SharedItem: Codable, Sendable {
    let index: Int
    let title: String
}

let arguments = CommandLine.arguments
guard arguments.count == 3, let count = Int(arguments[2]), count > 0 else {
    FileHandle.standardError.write(Data("usage: share-extension CONTAINER-DIR COUNT\n".utf8))
    exit(64)
}
do {
    let container = try GroupContainer(group: "group.com.example.share", directory: arguments[1])
    let inbox = try Wormhole(group: "group.com.example.share", transiting: .queue, container: container)
    for index in 1 ... count {
        try inbox.pass(SharedItem(index: index, title: "shared item \(index)"), identifier: "shared-items")
    }
    print("passed \(count) items")
} catch {
    // An expected failure (a refused container, a full disk): say it, as a user's program should.
    FileHandle.standardError.write(Data("share-extension: \(error)\n".utf8))
    exit(1)
}

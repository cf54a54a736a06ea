// darwin-tool: the wrapper from the command line, the other process of the wrapper's tests.
//   darwin-tool post NAME [COUNT]     posts NAME COUNT times
//   darwin-tool observe NAME COUNT    prints "ready", then "got NAME main=true" for each post
import DarwinNotificationCenter
import Foundation

setvbuf(stdout, nil, _IOLBF, 0) // each line out at once: the other process waits for it

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    FileHandle.standardError.write("usage: darwin-tool post|observe NAME [COUNT]\n".data(using: .utf8)!)
    exit(64)
}
let name = DarwinNotification.Name(arguments[2])
let count = arguments.count > 3 ? Int(arguments[3]) ?? 1 : 1

switch arguments[1] {
case "post":
    for _ in 0..<count {
        DarwinNotificationCenter.shared.post(name)
    }
    exit(0)
case "observe":
    var seen = 0
    DarwinNotificationCenter.shared.addObserver(for: name) { notification in
        seen += 1
        print("got \(notification.name.string) main=\(Thread.isMainThread)")
        if seen == count { exit(0) }
    }
    print("ready")
    RunLoop.main.run()
default:
    exit(64)
}


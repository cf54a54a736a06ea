// notify-dispatch: notify(3) from Swift as Apple's documentation shows it: `import notify`,
// notify_register_dispatch with a DispatchQueue and a closure that gets the token.
//   notify-dispatch observe NAME COUNT   prints "ready", then "token T main=true" for each post
//   notify-dispatch post NAME            notify_post(NAME)
import Foundation
import notify

setvbuf(stdout, nil, _IOLBF, 0) // each line out at once: the other process waits for it

let arguments = CommandLine.arguments
guard arguments.count >= 3 else { exit(64) }
let name = arguments[2]

if arguments[1] == "post" {
    let status = notify_post(name)
    exit(status == NOTIFY_STATUS_OK ? 0 : 1)
}

let count = arguments.count > 3 ? Int(arguments[3]) ?? 1 : 1
var token: Int32 = NOTIFY_TOKEN_INVALID
var seen = 0
let status = notify_register_dispatch(name, &token, DispatchQueue.main) { receivedToken in
    seen += 1
    print("token \(receivedToken == token) main=\(Thread.isMainThread)")
    if seen == count {
        notify_cancel(receivedToken)
        exit(0)
    }
}
guard status == NOTIFY_STATUS_OK else {
    print("notify_register_dispatch failed: \(status)")
    exit(1)
}
print("ready")
RunLoop.main.run()


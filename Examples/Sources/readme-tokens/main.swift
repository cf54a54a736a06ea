import DarwinNotify
import Dispatch

let center = NotifyCenter.default
let token = try center.fileDescriptorToken("com.example.changed")  // or checkingToken, signalToken(_:signal:),
                                                                   // dispatchToken(_:queue:handler:)
let source = DispatchSource.makeReadSource(fileDescriptor: token.fileDescriptor!, queue: .main)
source.setEventHandler { for t in (try? token.readPosts()) ?? [] { print("posted", t) } }
source.resume()
try token.suspend(); /* … posts are held … */ try token.resume()    // then one delivery, if any arrived
if try token.check() { /* posted since the last check */ }
try center.setState(42, for: "com.example.level")                 // shared by every process on the bus
let level = try center.state(of: "com.example.level")             // or token.state(), token.setState(_:)

// wormhole-pair: MMWormhole as an app and its extension use it (MMWormhole's README): an NSCoding
// class as the message object, a listener per identifier, messageWithIdentifier, clearing.
//   wormhole-pair listen COUNT   prints "ready", then one line per message heard, then exits
//   wormhole-pair pass           passes a Note, then a dictionary
//   wormhole-pair read           prints the last message of "note", clears it, prints it again
import Foundation
import MMWormhole

setvbuf(stdout, nil, _IOLBF, 0) // each line out at once: the other process waits for it

/// The message object: a class of the app's, NSCoding as MMWormhole's messages are.
class Note: NSObject, NSCoding {
    let text: String
    let count: Int

    init(text: String, count: Int) {
        self.text = text
        self.count = count
    }

    func encode(with coder: NSCoder) {
        coder.encode(text, forKey: "text")
        coder.encode(count, forKey: "count")
    }

    required init?(coder: NSCoder) {
        guard let text = coder.decodeObject(forKey: "text") as? String else { return nil }
        self.text = text
        self.count = coder.decodeInteger(forKey: "count")
    }
}

func describe(_ messageObject: Any?) -> String {
    if let note = messageObject as? Note { return "note \(note.text) \(note.count)" }
    if let dictionary = messageObject as? [String: Any] { return "dictionary \(dictionary["k"] as? String ?? "?")" }
    return messageObject == nil ? "nil" : "other \(type(of: messageObject!))"
}

let wormhole = MMWormhole(applicationGroupIdentifier: "group.com.example.applestyle", optionalDirectory: "wormhole")

switch CommandLine.arguments.dropFirst().first {
case "listen":
    let count = Int(CommandLine.arguments[2]) ?? 1
    var heard = 0
    wormhole.listenForMessage(withIdentifier: "note") { messageObject in
        heard += 1
        print("\(describe(messageObject)) main=\(Thread.isMainThread)")
        if heard == count {
            wormhole.stopListeningForMessage(withIdentifier: "note")
            exit(0)
        }
    }
    print("ready")
    RunLoop.main.run()
case "pass":
    wormhole.passMessageObject(Note(text: "hello", count: 3), identifier: "note")
case "pass-dictionary":
    wormhole.passMessageObject(["k": "v"] as NSDictionary, identifier: "note")
case "read":
    print(describe(wormhole.message(withIdentifier: "note")))
    wormhole.clearMessageContents(forIdentifier: "note")
    print(describe(wormhole.message(withIdentifier: "note")))
default:
    exit(64)
}

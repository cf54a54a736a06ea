// hostile-pass: not Apple-style code, the attacker of the wormhole-pair test. It writes keyed
// archives a listener must refuse straight into the wormhole's message file (Wormhole's own
// pass(data:identifier:), which is what any process of the group can do):
//   hostile-pass system | unknown | cycle | deep | malformed | garbage
import Foundation
import Wormhole

func archive(_ objects: [String]) -> Data {
    let xml = """
    <?xml version="1.0" encoding="UTF-8"?>
    <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
    <plist version="1.0"><dict>
    <key>$archiver</key><string>NSKeyedArchiver</string>
    <key>$version</key><integer>100000</integer>
    <key>$top</key><dict><key>root</key>\(uid(1))</dict>
    <key>$objects</key><array><string>$null</string>\(objects.joined())</array>
    </dict></plist>
    """
    return Data(xml.utf8)
}

func uid(_ n: Int) -> String { "<dict><key>CF$UID</key><integer>\(n)</integer></dict>" }
func classDescription(_ name: String) -> String {
    "<dict><key>$classname</key><string>\(name)</string><key>$classes</key><array><string>\(name)</string><string>NSObject</string></array></dict>"
}
func array(of refs: [Int], classAt: Int) -> String {
    "<dict><key>$class</key>\(uid(classAt))<key>NS.objects</key><array>\(refs.map(uid).joined())</array></dict>"
}

/// A class of this program's, which the listener does not have.
class Trap: NSObject {}

let payload: Data
switch CommandLine.arguments.dropFirst().first {
case "system": // a class of Foundation's that no message is made of
    payload = archive(["<dict><key>$class</key>\(uid(2))</dict>", classDescription("Foundation.Process")])
case "unknown": // a class the listener does not have
    payload = archive(["<dict><key>$class</key>\(uid(2))</dict>", classDescription(NSStringFromClass(Trap.self))])
case "cycle": // an array that holds itself
    payload = archive([array(of: [1], classAt: 2), classDescription("NSArray")])
case "deep": // 50,000 arrays, each in the last: unchecked, the unarchiver recurses off its stack
    let depth = 50_000
    payload = archive((1...depth).map { i in array(of: i < depth ? [i + 1] : [], classAt: depth + 1) } + [classDescription("NSArray")])
case "malformed": // an array whose contents are a string, a dictionary with keys and no values
    payload = archive(["<dict><key>$class</key>\(uid(2))<key>NS.objects</key><string>x</string></dict>",
                       classDescription("NSArray")])
case "garbage":
    payload = Data("bplist00 this is no archive".utf8)
default:
    exit(64)
}
do {
    let wormhole = try Wormhole(group: "group.com.example.applestyle", directory: "wormhole")
    try wormhole.pass(data: payload, identifier: "note")
} catch {
    print("hostile-pass: \(error)")
    exit(1)
}

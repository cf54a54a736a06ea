// SafeUnarchiver.swift: a keyed archive read without trusting it. MMWormhole unarchived whatever
// the message file held (`unarchiveObjectWithData:`): any class the archive named was made and its
// `init(coder:)` run. Here the archive is read as a property list first, and it is decoded only if
// every class it names is allowed, its object graph is at most `maximumDepth` deep and has no
// reference back to an object still being decoded.
import Foundation

/// Why an archive was refused.
public struct UnarchiveRefusal: Error, Sendable, CustomStringConvertible {
    public let description: String
}

enum SafeUnarchiver {
    /// The graph depth past which an archive is refused (the unarchiver recurses once a level).
    static let maximumDepth = 256

    /// Foundation's classes an archive may name: property-list values and a few plain values.
    static let foundationClasses: Set<String> = [
        "NSArray", "NSMutableArray", "NSDictionary", "NSMutableDictionary", "NSSet", "NSMutableSet",
        "NSString", "NSMutableString", "NSNumber", "NSData", "NSMutableData", "NSDate", "NSNull",
        "NSURL", "NSUUID",
    ]

    /// Modules whose classes are never an application's message (their NSCoding classes, if any,
    /// are the system's: file handles, streams, …).
    static let systemModules: Set<String> = [
        "Foundation", "FoundationEssentials", "FoundationInternationalization", "FoundationNetworking",
        "FoundationXML", "Swift", "Dispatch", "XCTest", "Testing", "DarwinNotify", "DarwinNotifyFoundation",
        "Wormhole", "MMWormhole",
    ]

    /// The archive's root object, decoded only if it passes the checks. `allowed`: the classes an
    /// application named (nil: any NSCoding class of the application's own modules).
    static func decode(_ data: Data, allowed: [AnyClass]?) throws(UnarchiveRefusal) -> Any? {
        let plist: Any
        do { plist = try PropertyListSerialization.propertyList(from: data, format: nil) } catch {
            throw UnarchiveRefusal(description: "not a keyed archive: \(error)")
        }
        guard let archive = plist as? [String: Any], archive["$archiver"] as? String == "NSKeyedArchiver",
              let objects = archive["$objects"] as? [Any], let top = archive["$top"] as? [String: Any] else {
            throw UnarchiveRefusal(description: "not a keyed archive ($archiver, $objects, $top)")
        }
        let names = try check(objects: objects, roots: top.values.flatMap(references))
        for name in names where !isAllowed(name, allowed: allowed) {
            throw UnarchiveRefusal(description: "the archive names the class \(name), which a message may not be")
        }
        let unarchiver: NSKeyedUnarchiver
        do { unarchiver = try NSKeyedUnarchiver(forReadingFrom: data) } catch {
            throw UnarchiveRefusal(description: "the archive does not decode: \(error)")
        }
        unarchiver.requiresSecureCoding = false
        // swift-corelibs-foundation's default policy ends the process on a decoding error.
        unarchiver.decodingFailurePolicy = .setErrorAndReturn
        defer { unarchiver.finishDecoding() }
        let root = unarchiver.decodeObject(forKey: NSKeyedArchiveRootObjectKey)
        if let error = unarchiver.error { throw UnarchiveRefusal(description: "the archive does not decode: \(error)") }
        return root
    }

    /// Walks the object graph from the roots: its depth, references back to an object on the path
    /// (a cycle the unarchiver would recurse into), references out of range; returns the class
    /// names of the objects it reaches.
    private static func check(objects: [Any], roots: [Int]) throws(UnarchiveRefusal) -> Set<String> {
        var names: Set<String> = []
        var state = [UInt8](repeating: 0, count: objects.count) // 0 unseen, 1 on the path, 2 done
        // An explicit stack: (object, its references, the next one to follow).
        var stack: [(index: Int, refs: [Int], next: Int)] = []
        func enter(_ index: Int) throws(UnarchiveRefusal) {
            guard index >= 0, index < objects.count else {
                throw UnarchiveRefusal(description: "a reference to object \(index) of \(objects.count)")
            }
            switch state[index] {
            case 1: throw UnarchiveRefusal(description: "object \(index) refers back to itself through its contents")
            case 2: return
            default: break
            }
            guard stack.count < maximumDepth else {
                throw UnarchiveRefusal(description: "the archive's objects nest deeper than \(maximumDepth)")
            }
            state[index] = 1
            let object = objects[index]
            if let entry = object as? [AnyHashable: Any], let name = entry["$classname"] as? String {
                names.insert(name) // a class description: nothing to follow
                stack.append((index, [], 0))
            } else {
                stack.append((index, references(object), 0))
            }
        }
        for root in roots {
            try enter(root)
            while let last = stack.last {
                if last.next < last.refs.count {
                    stack[stack.count - 1].next += 1
                    try enter(last.refs[last.next])
                } else {
                    state[last.index] = 2
                    stack.removeLast()
                }
            }
        }
        return names
    }

    /// The objects a value refers to: a UID, or UIDs in an array or a dictionary's values.
    private static func references(_ value: Any) -> [Int] {
        if let uid = uidValue(value) { return [uid] }
        if let array = value as? [Any] { return array.flatMap(references) }
        if let dictionary = value as? [AnyHashable: Any] { return dictionary.values.flatMap(references) }
        return []
    }

    /// A keyed-archive UID's number. Foundation's UID type is internal: its `value` is read by
    /// reflection, and only from an object whose type is that UID type.
    private static func uidValue(_ value: Any) -> Int? {
        guard String(describing: type(of: value)).hasSuffix("KeyedArchiverUID") else { return nil }
        for child in Mirror(reflecting: value).children where child.label == "value" {
            if let number = child.value as? UInt32 { return Int(number) }
        }
        return nil
    }

    private static func isAllowed(_ name: String, allowed: [AnyClass]?) -> Bool {
        if foundationClasses.contains(name) { return true }
        if let allowed { return allowed.contains { NSStringFromClass($0) == name } }
        // An application's class: module-qualified, of no system module, an NSObject that codes.
        guard let dot = name.firstIndex(of: "."), !systemModules.contains(String(name[..<dot])),
              let found = NSClassFromString(name) else { return false }
        return found is NSCoding.Type && found is NSObject.Type
    }
}

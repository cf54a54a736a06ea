// PropertyList.swift: a userInfo dictionary to the C core's property list (CNotify_plist) and back.
// Only what Apple allows in a property list crosses: anything else is refused with the key path
// that holds it, before anything is sent.
import CNotify
import DarwinNotify
import Foundation

/// Why a distributed notification was not posted.
public struct DistributedNotificationError: Error, CustomStringConvertible, Sendable, Equatable {
    public enum Code: Sendable, Equatable {
        /// A userInfo value (at `path`) of a type no property list has.
        case notPropertyList
        /// A userInfo dictionary key (at `path`) that is not a String.
        case keyNotString
        /// The userInfo is past the bounds (``DistributedNotificationCenter/userInfoMaximumBytes``,
        /// ``DistributedNotificationCenter/userInfoMaximumDepth``), or holds NaN or an infinity.
        case outOfBounds
        /// The C core refused the post (no bus, a bad name); `status` says which.
        case notify
    }
    public let code: Code
    /// Where in the userInfo, as `userInfo["a"][2]`; empty when it is about the whole post.
    public let path: String
    public let message: String
    /// The NOTIFY_STATUS_* code for `.notify`.
    public let status: UInt32

    init(_ code: Code, path: String = "", _ message: String, status: UInt32 = 0) {
        self.code = code
        self.path = path
        self.message = message
        self.status = status
    }

    public var description: String { path.isEmpty ? message : "\(path): \(message)" }
}

/// An owned C property list, freed with its owner.
final class PropertyListTree {
    let pointer: OpaquePointer
    private init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { CNotify_plist_free(pointer) }

    /// The C tree of `userInfo`, or the first reason it cannot be one.
    static func make(_ userInfo: [AnyHashable: Any]) throws(DistributedNotificationError) -> PropertyListTree {
        PropertyListTree(try dictionary(userInfo, path: "userInfo"))
    }

    private static func lastError() -> String { String(cString: CNotify_last_error()) }

    private static func made(_ value: OpaquePointer?, path: String) throws(DistributedNotificationError) -> OpaquePointer {
        guard let value else { throw DistributedNotificationError(.outOfBounds, path: path, lastError()) }
        return value
    }

    private static func dictionary(_ values: [AnyHashable: Any], path: String) throws(DistributedNotificationError) -> OpaquePointer {
        let dict = try made(CNotify_plist_dictionary(), path: path)
        do throws(DistributedNotificationError) {
            // Sorted keys: the same userInfo is the same message, whatever the hash seed.
            let entries = try values.map { (key, value) throws(DistributedNotificationError) -> (String, Any) in
                guard let text = key.base as? String else {
                    throw DistributedNotificationError(.keyNotString, path: path,
                                                       "a key of type \(type(of: key.base)); property-list keys are strings")
                }
                return (text, value)
            }.sorted { $0.0 < $1.0 }
            for (key, value) in entries {
                let itemPath = "\(path)[\(quoted(key))]"
                let item = try convert(value, path: itemPath)
                guard CNotify_plist_set(dict, key, item) == UInt32(NOTIFY_STATUS_OK) else {
                    CNotify_plist_free(item)
                    throw DistributedNotificationError(.outOfBounds, path: itemPath, lastError())
                }
            }
        } catch {
            CNotify_plist_free(dict)
            throw error
        }
        return dict
    }

    private static func array(_ values: [Any], path: String) throws(DistributedNotificationError) -> OpaquePointer {
        let list = try made(CNotify_plist_array(), path: path)
        do throws(DistributedNotificationError) {
            for (index, value) in values.enumerated() {
                let itemPath = "\(path)[\(index)]"
                let item = try convert(value, path: itemPath)
                guard CNotify_plist_append(list, item) == UInt32(NOTIFY_STATUS_OK) else {
                    CNotify_plist_free(item)
                    throw DistributedNotificationError(.outOfBounds, path: itemPath, lastError())
                }
            }
        } catch {
            CNotify_plist_free(list)
            throw error
        }
        return list
    }

    /// One value. An NSNumber object is read by its objCType first: cast to Bool or Int it would
    /// answer to both (on Linux `NSNumber(value: 1) is Bool`); native Swift values cast exactly.
    private static func convert(_ value: Any, path: String) throws(DistributedNotificationError) -> OpaquePointer {
        if type(of: value) is NSNumber.Type, let n = value as? NSNumber { return try number(n, path: path) }
        switch value {
        case let v as String: return try made(CNotify_plist_string(v), path: path)
        case let v as Bool: return try made(CNotify_plist_bool(v ? 1 : 0), path: path)
        case let v as Int: return try made(CNotify_plist_integer(Int64(v)), path: path)
        case let v as Int8: return try made(CNotify_plist_integer(Int64(v)), path: path)
        case let v as Int16: return try made(CNotify_plist_integer(Int64(v)), path: path)
        case let v as Int32: return try made(CNotify_plist_integer(Int64(v)), path: path)
        case let v as Int64: return try made(CNotify_plist_integer(v), path: path)
        case let v as UInt8: return try made(CNotify_plist_integer(Int64(v)), path: path)
        case let v as UInt16: return try made(CNotify_plist_integer(Int64(v)), path: path)
        case let v as UInt32: return try made(CNotify_plist_integer(Int64(v)), path: path)
        case let v as UInt:
            guard let exact = Int64(exactly: v) else {
                throw DistributedNotificationError(.outOfBounds, path: path, "\(v) is past the largest property-list integer (2^63-1)")
            }
            return try made(CNotify_plist_integer(exact), path: path)
        case let v as UInt64:
            guard let exact = Int64(exactly: v) else {
                throw DistributedNotificationError(.outOfBounds, path: path, "\(v) is past the largest property-list integer (2^63-1)")
            }
            return try made(CNotify_plist_integer(exact), path: path)
        case let v as Double: return try made(CNotify_plist_real(v), path: path)
        case let v as Float: return try made(CNotify_plist_real(Double(v)), path: path)
        case let v as Data:
            let data = v.withUnsafeBytes { CNotify_plist_data($0.baseAddress, $0.count) }
            return try made(data, path: path)
        case let v as Date: return try made(CNotify_plist_date(v.timeIntervalSince1970), path: path)
        case let v as [AnyHashable: Any]: return try dictionary(v, path: path)
        case let v as [Any]: return try array(v, path: path)
        default:
            throw DistributedNotificationError(.notPropertyList, path: path,
                                               "a value of type \(type(of: value)); a property list holds String, Int, Double, Bool, Data, Date, arrays and [String: Any]")
        }
    }

    private static func number(_ n: NSNumber, path: String) throws(DistributedNotificationError) -> OpaquePointer {
        // objCType: "c" is how Foundation marks a Bool-made NSNumber.
        let type = String(cString: n.objCType)
        if type == "c" || type == "B" { return try made(CNotify_plist_bool(n.boolValue ? 1 : 0), path: path) }
        if type == "f" || type == "d" { return try made(CNotify_plist_real(n.doubleValue), path: path) }
        if type == "Q" || type == "L" || type == "I" || type == "S" || type == "C" {
            guard let exact = Int64(exactly: n.uint64Value) else {
                throw DistributedNotificationError(.outOfBounds, path: path, "\(n) is past the largest property-list integer (2^63-1)")
            }
            return try made(CNotify_plist_integer(exact), path: path)
        }
        return try made(CNotify_plist_integer(n.int64Value), path: path)
    }

    private static func quoted(_ key: String) -> String { "\"" + key.replacingOccurrences(of: "\"", with: "\\\"") + "\"" }

    // ---- back: what a receiver reads ----

    /// The userInfo a C property list (a dictionary) holds: String, NSNumber (integers, reals,
    /// booleans), Data, Date, [Any] and [String: Any].
    static func userInfo(_ plist: OpaquePointer) -> [AnyHashable: Any] {
        guard case .dictionary(let entries) = PropertyListValue(plist) else { return [:] }
        return Dictionary(entries.map { (AnyHashable($0.key), value($0.value)) }, uniquingKeysWith: { $1 })
    }

    private static func value(_ v: PropertyListValue) -> Any {
        switch v {
        case .string(let s): return s
        // Numbers and booleans as NSNumber, as macOS hands them over: `as? Double` on an integer,
        // `as? Float` and `as? Int` on a Bool then answer as they do there.
        case .integer(let i): return NSNumber(value: i)
        case .real(let d): return NSNumber(value: d)
        case .bool(let b): return NSNumber(value: b)
        case .data(let bytes): return Data(bytes)
        case .date(let seconds): return Date(timeIntervalSince1970: seconds)
        case .array(let items): return items.map(value)
        case .dictionary(let entries): return Dictionary(entries.map { ($0.key, value($0.value)) }, uniquingKeysWith: { $1 })
        }
    }
}

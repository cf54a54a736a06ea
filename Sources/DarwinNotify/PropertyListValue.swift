// PropertyListValue.swift: a property list (the userInfo of a distributed notification) as Swift
// values, Foundation-free: read from the C core's CNotify_plist once, or made into one to post.
// DarwinNotifyFoundation turns it into [AnyHashable: Any], distnotify into JSON.
import CNotify

/// A property-list value, as Apple allows in a distributed notification's userInfo: the eight
/// types of `CNotify_plist` (docs/PROTOCOL.md, "Distributed notifications").
public indirect enum PropertyListValue: Sendable {
    /// A string (UTF-8).
    case string(String)
    /// A signed 64-bit integer.
    case integer(Int64)
    /// A finite double.
    case real(Double)
    /// A Boolean.
    case bool(Bool)
    /// Bytes.
    case data([UInt8])
    /// A date, as seconds since 1970.
    case date(secondsSince1970: Double)
    /// An array of values.
    case array([PropertyListValue])
    /// A dictionary with string keys, in the order the keys were set.
    case dictionary([(key: String, value: PropertyListValue)])

    /// The value `plist` holds. The core hands up only the eight types, each read with its own getter.
    /// The value a C property list holds (read whole: the C value may go once this returns).
    /// - Parameter plist: a `CNotify_plist`.
    public init(_ plist: OpaquePointer) {
        switch CNotify_plist_type_of(plist) {
        case CNOTIFY_PLIST_STRING:
            var s: UnsafePointer<CChar>?
            CNotify_plist_get_string(plist, &s)
            self = .string(s.map { String(cString: $0) } ?? "")
        case CNOTIFY_PLIST_INTEGER:
            var v: Int64 = 0
            CNotify_plist_get_integer(plist, &v)
            self = .integer(v)
        case CNOTIFY_PLIST_REAL:
            var v = 0.0
            CNotify_plist_get_real(plist, &v)
            self = .real(v)
        case CNOTIFY_PLIST_BOOL:
            var v: Int32 = 0
            CNotify_plist_get_bool(plist, &v)
            self = .bool(v != 0)
        case CNOTIFY_PLIST_DATA:
            var bytes: UnsafeRawPointer?
            var count = 0
            CNotify_plist_get_data(plist, &bytes, &count)
            self = .data(bytes.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? [])
        case CNOTIFY_PLIST_DATE:
            var v = 0.0
            CNotify_plist_get_date(plist, &v)
            self = .date(secondsSince1970: v)
        case CNOTIFY_PLIST_ARRAY:
            self = .array((0..<CNotify_plist_count(plist)).compactMap { CNotify_plist_item(plist, $0).map(PropertyListValue.init) })
        default: // CNOTIFY_PLIST_DICTIONARY
            self = .dictionary((0..<CNotify_plist_count(plist)).compactMap { i in
                guard let key = CNotify_plist_key(plist, i), let item = CNotify_plist_item(plist, i) else { return nil }
                return (String(cString: key), PropertyListValue(item))
            })
        }
    }

    /// The value as a new C property list (`CNotify_plist`), which the caller frees with
    /// `CNotify_plist_free`.
    /// - Throws: ``NotifyError/Code/invalidRequest`` for a value the C core refuses (a real that
    ///   is not finite, a string with a NUL or not UTF-8, past the depth or weight bounds).
    public func makeCPropertyList() throws(NotifyError) -> OpaquePointer {
        let made: OpaquePointer?
        switch self {
        case .string(let s): made = CNotify_plist_string(s)
        case .integer(let v): made = CNotify_plist_integer(v)
        case .real(let v): made = CNotify_plist_real(v)
        case .bool(let v): made = CNotify_plist_bool(v ? 1 : 0)
        case .data(let bytes): made = bytes.withUnsafeBytes { CNotify_plist_data($0.baseAddress, $0.count) }
        case .date(let seconds): made = CNotify_plist_date(seconds)
        case .array(let items):
            guard let array = CNotify_plist_array() else { throw NotifyError.lastError(default: "out of memory") }
            for item in items {
                let child: OpaquePointer
                do { child = try item.makeCPropertyList() } catch { CNotify_plist_free(array); throw error }
                let status = CNotify_plist_append(array, child)
                if status != UInt32(NOTIFY_STATUS_OK) {
                    CNotify_plist_free(child)
                    CNotify_plist_free(array)
                    try NotifyError.check(status)
                }
            }
            made = array
        case .dictionary(let entries):
            guard let dictionary = CNotify_plist_dictionary() else { throw NotifyError.lastError(default: "out of memory") }
            for (key, value) in entries {
                let child: OpaquePointer
                do { child = try value.makeCPropertyList() } catch { CNotify_plist_free(dictionary); throw error }
                let status = CNotify_plist_set(dictionary, key, child)
                if status != UInt32(NOTIFY_STATUS_OK) {
                    CNotify_plist_free(child)
                    CNotify_plist_free(dictionary)
                    try NotifyError.check(status)
                }
            }
            made = dictionary
        }
        guard let made else { throw NotifyError.lastError(default: "the value is not a property list") }
        return made
    }
}

// PropertyListValue.swift: a C property list (CNotify_plist, the userInfo of a distributed
// notification) read once into Swift values, for the package's two readers: DarwinNotifyFoundation
// (userInfo as [AnyHashable: Any]) and distnotify (JSON). Package-only: not Swift API.
import CNotify

package indirect enum PropertyListValue: Sendable {
    case string(String)
    case integer(Int64)
    case real(Double)
    case bool(Bool)
    case data([UInt8])
    case date(secondsSince1970: Double)
    case array([PropertyListValue])
    case dictionary([(key: String, value: PropertyListValue)]) // in the order the keys were set

    /// The value `plist` holds. The core hands up only the eight types, each read with its own getter.
    package init(_ plist: OpaquePointer) {
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
}

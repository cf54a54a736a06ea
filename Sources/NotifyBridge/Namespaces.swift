// Namespaces: which names a bridge carries. A namespace `a.b` holds `a.b` and every `a.b.*`,
// never `a.bc` (D-Bus arg0namespace, as CNotify_center_add_namespace_handler).
package enum Namespaces {
    package static func contains(_ namespace: String, _ name: String) -> Bool {
        name == namespace || (name.hasPrefix(namespace) && name.utf8.dropFirst(namespace.utf8.count).first == UInt8(ascii: "."))
    }

    /// The namespaces without those inside another (`a` covers `a.b`): one observer or one
    /// subscription per remaining one, so no post is seen twice.
    package static func minimal(_ namespaces: [String]) -> [String] {
        var kept: [String] = []
        for ns in Set(namespaces).sorted(by: { $0.utf8.count < $1.utf8.count || ($0.utf8.count == $1.utf8.count && $0 < $1) })
        where !kept.contains(where: { contains($0, ns) }) {
            kept.append(ns)
        }
        return kept
    }
}

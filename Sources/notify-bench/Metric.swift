/// One figure of a suite that is not a latency distribution, with its reference from the same
/// run and the target the ratio must meet.
struct Metric {
    enum Goal { case atMost(Double), atLeast(Double), none }
    let label: String
    let value: Double
    let unit: String
    let reference: Double?      // what the value is compared with, in the same unit
    let goal: Goal
    var note: String = ""

    var ratio: Double? { reference.map { value / $0 } }
    var passes: Bool {
        switch goal {
        case .none: return true
        case .atMost(let t): return (ratio ?? value) <= t
        case .atLeast(let t): return (ratio ?? value) >= t
        }
    }
    var targetText: String {
        switch goal {
        case .none: return "—"
        case .atMost(let t): return reference == nil ? "≤\(fmt(t)) \(unit)" : "≤\(fmt(t))×"
        case .atLeast(let t): return reference == nil ? "≥\(fmt(t)) \(unit)" : "≥\(fmt(t))×"
        }
    }
}

func fmt(_ v: Double) -> String {
    v >= 100 ? String(format: "%.0f", v) : v >= 10 ? String(format: "%.1f", v) : String(format: "%.2f", v)
}

func printMetrics(title: String, _ metrics: [Metric]) {
    print(title)
    func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s + " " : s + String(repeating: " ", count: n - s.count) }
    print(pad("measure", 44) + pad("value", 16) + pad("ratio", 10) + pad("target", 14) + "ok")
    for m in metrics {
        let ratio = m.ratio.map { String(format: "%.3f×", $0) } ?? "—"
        let ok: String
        if case .none = m.goal { ok = "" } else { ok = m.passes ? "✓" : "✗" }
        print(pad(m.label, 44) + pad("\(fmt(m.value)) \(m.unit)", 16) + pad(ratio, 10) + pad(m.targetText, 14) + ok
              + (m.note.isEmpty ? "" : "  " + m.note))
    }
    print()
}

func json(suite: String, metrics: [Metric]) -> String {
    let items = metrics.map { m -> String in
        var f = ["\"measure\":\"\(m.label)\"", String(format: "\"value\":%.4f", m.value), "\"unit\":\"\(m.unit)\""]
        if let r = m.ratio { f.append(String(format: "\"ratio\":%.4f", r)) }
        if case .none = m.goal {} else { f.append("\"target\":\"\(m.targetText)\"", ) ; f.append("\"pass\":\(m.passes)") }
        if !m.note.isEmpty { f.append("\"note\":\"\(m.note)\"") }
        return "{" + f.joined(separator: ",") + "}"
    }
    return "{\"suite\":\"\(suite)\",\"measures\":[" + items.joined(separator: ",") + "]}"
}

import Histogram

/// Latency samples in nanoseconds; percentiles come from an HdrHistogram (3 significant digits).
struct Samples {
    private(set) var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000_000, numberOfSignificantValueDigits: .three)

    mutating func record(_ nanoseconds: UInt64) { _ = histogram.record(nanoseconds) }
    mutating func add(_ other: Samples) { histogram.add(other.histogram) }

    var count: UInt64 { histogram.totalCount }
    func percentileMicros(_ p: Double) -> Double { Double(histogram.valueAtPercentile(p)) / 1000 }
    var p50: Double { percentileMicros(50) }
    var p99: Double { percentileMicros(99) }
}

/// One row of a suite's table: ours against a reference measured in the same run.
struct Row {
    let label: String
    let samples: Samples
    let reference: Double?     // the p50 it is compared with (µs), nil for the floor itself
    let target: Double?        // the ratio it must not exceed
    var extraCheck: (String, Bool)? = nil

    var ratio: Double? { reference.map { samples.p50 / $0 } }
    var passes: Bool {
        let ratioOK = zip(ratio.map { [$0] } ?? [], target.map { [$0] } ?? []).allSatisfy { $0 <= $1 }
        return ratioOK && (extraCheck?.1 ?? true)
    }
}

func printTable(title: String, rows: [Row]) {
    print(title)
    func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }
    print(pad("variant", 38) + pad("p50 µs", 10) + pad("p99 µs", 10) + pad("samples", 9) + pad("ratio p50", 11) + pad("target", 9) + "ok")
    for row in rows {
        let ratio = row.ratio.map { String(format: "%.3f×", $0) } ?? "—"
        let target = row.target.map { String(format: "≤%.2f×", $0) } ?? "—"
        let ok = row.target == nil && row.extraCheck == nil ? "" : (row.passes ? "✓" : "✗")
        var line = pad(row.label, 38) + pad(String(format: "%.1f", row.samples.p50), 10)
        line += pad(String(format: "%.1f", row.samples.p99), 10) + pad("\(row.samples.count)", 9)
        line += pad(ratio, 11) + pad(target, 9) + ok
        if let (what, pass) = row.extraCheck { line += "  (\(what): \(pass ? "✓" : "✗"))" }
        print(line)
    }
    print()
}

func json(suite: String, rows: [Row]) -> String {
    let items = rows.map { row -> String in
        var fields = ["\"variant\":\"\(row.label)\"", String(format: "\"p50_us\":%.2f", row.samples.p50),
                      String(format: "\"p99_us\":%.2f", row.samples.p99), "\"samples\":\(row.samples.count)"]
        if let r = row.ratio { fields.append(String(format: "\"ratio_p50\":%.4f", r)) }
        if let t = row.target { fields.append(String(format: "\"target\":%.2f", t)) }
        if row.target != nil || row.extraCheck != nil { fields.append("\"pass\":\(row.passes)") }
        return "{" + fields.joined(separator: ",") + "}"
    }
    return "{\"suite\":\"\(suite)\",\"rows\":[" + items.joined(separator: ",") + "]}"
}

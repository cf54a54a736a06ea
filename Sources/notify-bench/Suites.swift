import Foundation

struct Options {
    var samples = 6000
    var rounds = 3
    var warmup = 300
    var json = false
    var strict = false
    /// `cli`: more executables timed in the same alternation as notifyutil and dbus-send, each run
    /// as `PATH -z 0 -p NAME` (cli-floor/run.sh passes the start-up floors it builds).
    var cliExtras: [String] = []
}

/// `latency`: post → callback in another process, ours against the raw-libdbus floor. The variants
/// run interleaved in rounds, so drift on a noisy machine hits all of them alike.
func latencySuite(_ options: Options) async throws -> [Row] {
    let bus = try PrivateBus()
    defer { bus.stop() }
    var results: [PingPong.Variant: Samples] = [:]
    let perRound = max(1, options.samples / options.rounds)
    for _ in 0..<options.rounds {
        for variant in PingPong.Variant.allCases {
            let s = try await PingPong.measure(variant, bus: bus.address, samples: perRound, warmup: options.warmup)
            results[variant, default: Samples()].add(s)
        }
    }
    let floor = results[.floor]!
    let c = results[.cCallback]!, swift = results[.swiftClosure]!, async = results[.swiftAsync]!
    // Targets of issue 36 (the default mode at the direct path's speed): C ≤ 0.30× the bus floor at
    // p50, p99 ≤ 0.50× the floor's; a closure with no queue ≤ 0.35×. Of issue 23: an AsyncSequence
    // ≤ 0.60×; a closure on a queue keeps its hop (≤ 1.20×).
    return [
        Row(label: PingPong.Variant.floor.rawValue, samples: floor, reference: nil, target: nil),
        Row(label: PingPong.Variant.cCallback.rawValue, samples: c, reference: floor.p50, target: 0.30,
            extraCheck: ("p99 ≤ 0.5× floor p99", c.p99 <= 0.5 * floor.p99)),
        Row(label: PingPong.Variant.cBusOnly.rawValue, samples: results[.cBusOnly]!, reference: floor.p50, target: nil),
        Row(label: PingPong.Variant.cDirectOnly.rawValue, samples: results[.cDirectOnly]!, reference: floor.p50, target: nil,
            extraCheck: ("p99 ≤ 0.5× floor p99", results[.cDirectOnly]!.p99 <= 0.5 * floor.p99)),
        Row(label: PingPong.Variant.swiftClosure.rawValue, samples: swift, reference: floor.p50, target: 1.20,
            extraCheck: ("p99 ≤ 2× own p50", swift.p99 <= 2 * swift.p50)),
        Row(label: PingPong.Variant.swiftAsync.rawValue, samples: async, reference: floor.p50, target: 0.60,
            extraCheck: ("p99 ≤ 2× own p50", async.p99 <= 2 * async.p50)),
        Row(label: PingPong.Variant.swiftAsyncPlain.rawValue, samples: results[.swiftAsyncPlain]!, reference: floor.p50, target: nil),
        Row(label: PingPong.Variant.swiftDirect.rawValue, samples: results[.swiftDirect]!, reference: floor.p50, target: 0.35),
        // The floors without a daemon (issue 23): what a same-host fast path could reach here.
        Row(label: PingPong.Variant.peer.rawValue, samples: results[.peer]!, reference: floor.p50, target: nil),
        Row(label: PingPong.Variant.uds.rawValue, samples: results[.uds]!, reference: floor.p50, target: nil),
    ]
}

/// `distributed`: post → closure in another process with a 1 KiB userInfo (DistributedNotification-
/// Center), against a plain post to a Swift closure (queue: nil) and the raw-libdbus floor,
/// interleaved in rounds. No target: the issue asks for the ratios.
func distributedSuite(_ options: Options) async throws -> [Row] {
    let bus = try PrivateBus()
    defer { bus.stop() }
    var floor = Samples(), plain = Samples(), distributed = Samples()
    let perRound = max(1, options.samples / options.rounds)
    for _ in 0..<options.rounds {
        floor.add(try await PingPong.measure(.floor, bus: bus.address, samples: perRound, warmup: options.warmup))
        plain.add(try await PingPong.measure(.swiftDirect, bus: bus.address, samples: perRound, warmup: options.warmup))
        distributed.add(try await PingPong.measure(.distributed, bus: bus.address, samples: perRound, warmup: options.warmup))
    }
    return [
        Row(label: PingPong.Variant.floor.rawValue, samples: floor, reference: nil, target: nil),
        Row(label: PingPong.Variant.swiftDirect.rawValue, samples: plain, reference: floor.p50, target: nil),
        Row(label: PingPong.Variant.distributed.rawValue + " vs floor", samples: distributed, reference: floor.p50, target: nil),
        Row(label: PingPong.Variant.distributed.rawValue + " vs plain post", samples: distributed, reference: plain.p50, target: nil),
    ]
}

/// `names`: the C-callback ping-pong while 10 other processes observe 1,000 names each
/// (10,000 names), against the same ping-pong with no other observer, in the same run; then with
/// 10 namespace observers added, against the run without them.
func namesSuite(_ options: Options) async throws -> [Row] {
    let bus = try PrivateBus()
    defer { bus.stop() }
    var quiet = Samples(), loaded = Samples(), floorLoaded = Samples(), withNamespaces = Samples()
    let perRound = max(1, options.samples / options.rounds)
    for _ in 0..<options.rounds {
        quiet.add(try await PingPong.measure(.cCallback, bus: bus.address, samples: perRound, warmup: options.warmup))
        let background = try (0..<10).map { i in
            try Child("cnotify-probe", ["observe-many", "names.bg\(i)", "1000"], environment: ["DARWIN_NOTIFY_BUS": bus.address])
        }
        for child in background { _ = try child.readLine { $0 == "ready" } }
        loaded.add(try await PingPong.measure(.cCallback, bus: bus.address, samples: perRound, warmup: options.warmup))
        floorLoaded.add(try await PingPong.measure(.floor, bus: bus.address, samples: perRound, warmup: options.warmup))
        // The same, plus 10 namespace observers (one arg0namespace rule each, on no interface:
        // the daemon checks those for every post).
        let namespaces = try (0..<10).map { i in
            try Child("cnotify-probe", ["observe-namespace", "names.ns\(i)"], environment: ["DARWIN_NOTIFY_BUS": bus.address])
        }
        for child in namespaces { _ = try child.readLine { $0 == "ready" } }
        withNamespaces.add(try await PingPong.measure(.cCallback, bus: bus.address, samples: perRound, warmup: options.warmup))
        for child in namespaces { child.stop() }
        for child in background { child.stop() }
    }
    return [
        Row(label: "C callback, 1 name observed", samples: quiet, reference: nil, target: nil),
        Row(label: "C callback, +10 procs × 1,000 names", samples: loaded, reference: quiet.p50, target: 1.5),
        Row(label: "floor, +10 procs × 1,000 names", samples: floorLoaded, reference: quiet.p50, target: nil),
        Row(label: "C callback, + 10 namespace observers", samples: withNamespaces,
            reference: loaded.p50, target: 1.1),
    ]
}

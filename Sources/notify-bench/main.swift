// notify-bench: DarwinNotify against the raw-libdbus floor, measured in the same run on a
// private dbus-daemon. Usage: notify-bench <suite>|all [--samples N] [--rounds N] [--warmup N] [--json] [--strict]
// (--strict: exit 1 when a target is missed)
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.count == 3, arguments[0] == "_swift-echo" || arguments[0] == "_swift-echo-direct" {
    let queue = arguments[0] == "_swift-echo" ? DispatchQueue(label: "bench.echo") : nil
    try PingPong.runSwiftEcho(ping: arguments[1], pong: arguments[2], queue: queue)
}

if arguments.count == 3, arguments[0] == "_swift-echo-async" || arguments[0] == "_swift-echo-async-plain" {
    try await PingPong.runSwiftAsyncEcho(ping: arguments[1], pong: arguments[2], preferred: arguments[0] == "_swift-echo-async")
}

if arguments.count == 3, arguments[0] == "_distributed-echo" {
    try PingPong.runDistributedEcho(ping: arguments[1], pong: arguments[2])
}

if arguments.count >= 2, arguments[0] == "_peer-sub" {
    try SwiftPeer.runSubscriber(address: arguments[1], count: arguments.count >= 3 ? Int(arguments[2]) : nil)
}

func usage() -> Never {
    FileHandle.standardError.write(Data("usage: notify-bench latency|names|throughput|fanout|check|wormhole|memory|cli|bridge|peers|distributed|launch|all [--samples N] [--rounds N] [--warmup N] [--json] [--strict] [--cli-extra PATH]...\n".utf8))
    exit(64)
}

var options = Options()
var suites: [String] = []
var i = 0
while i < arguments.count {
    switch arguments[i] {
    case "--json": options.json = true
    case "--cli-extra":
        guard i + 1 < arguments.count, arguments[i + 1].hasPrefix("/") else { usage() }
        options.cliExtras.append(arguments[i + 1])
        i += 1
    case "--strict": options.strict = true
    case "--samples", "--rounds", "--warmup":
        guard i + 1 < arguments.count, let n = Int(arguments[i + 1]), n > 0 else { usage() }
        switch arguments[i] {
        case "--samples": options.samples = n
        case "--rounds": options.rounds = n
        default: options.warmup = n
        }
        i += 1
    case "latency", "names", "throughput", "fanout", "check", "wormhole", "memory", "cli", "bridge", "peers", "distributed", "launch": suites.append(arguments[i])
    case "all": suites += ["latency", "names", "throughput", "fanout", "check", "wormhole", "memory", "cli", "peers", "distributed", "launch"]
    default: usage()
    }
    i += 1
}
if suites.isEmpty { usage() }

var failed = false
do {
    for suite in suites {
        switch suite {
        case "latency", "names", "distributed":
            let rows = suite == "latency" ? try await latencySuite(options)
                : suite == "names" ? try await namesSuite(options) : try await distributedSuite(options)
            let title = suite == "latency"
                ? "latency: post → callback in another process, one way (round trip / 2), \(options.rounds) interleaved rounds, \(options.warmup) warm-up round trips per run"
                : suite == "names" ? "names: C callback latency with 10,000 names observed by 10 other processes vs none"
                : "distributed: a post with a 1 KiB userInfo → observer closure in another process, one way, against a plain post and the floor, \(options.rounds) interleaved rounds"
            if options.json { print(json(suite: suite, rows: rows)) } else { printTable(title: title, rows: rows) }
            failed = failed || rows.contains { !$0.passes }
        case "peers":
            let table = try await peersSuite(options)
            if options.json { print(json(suite: suite, table: table)) } else { printPeers(table, rounds: options.rounds) }
        case "wormhole":
            let (rows, metrics) = try await wormholeSuite(options)
            if options.json {
                print(json(suite: suite, rows: rows, metrics: metrics))
            } else {
                printTable(title: "wormhole: pass → listener in another process, one way (round trip / 2), \(options.rounds) interleaved rounds", rows: rows)
                printMetrics(title: "wormhole: large payloads and queue throughput", metrics)
            }
            failed = failed || rows.contains { !$0.passes } || metrics.contains { !$0.passes }
        default:
            let (metrics, title): ([Metric], String)
            switch suite {
            case "check": (metrics, title) = (try checkSuite(options), "check: notify_check on an unchanged token")
            case "memory": (metrics, title) = (try memorySuite(options), "memory: resident set of an idle process on the same bus")
            case "fanout": (metrics, title) = (try fanoutSuite(options), "fanout: one post to 100 observer processes, until the last has it")
            case "bridge": (metrics, title) = (try bridgeSuite(options), "bridge: post on bus A → callback on bus B through notify-bridge and mosquitto on loopback, vs mosquitto_pub → mosquitto_sub")
            case "throughput": (metrics, title) = (try throughputSuite(options), "throughput: sustained posts, counted at the receiver (\(options.rounds) alternating rounds)")
            case "launch": (metrics, title) = (try launchSuite(options), "launch: a job's cold start on a post (darwin-notifyd's launcher) vs the same program started by hand, alternating")
            default: (metrics, title) = (try cliSuite(options), "cli: wall time of one post from the command line, same bus, alternating")
            }
            if options.json { print(json(suite: suite, metrics: metrics)) } else { printMetrics(title: title, metrics) }
            failed = failed || metrics.contains { !$0.passes }
        }
    }
} catch {
    // A suite that cannot run (a missing tool, a child that died) says so instead of trapping.
    FileHandle.standardError.write(Data("notify-bench: \(error)\n".utf8))
    PlainC.removeLibrary()
    exit(2)
}
PlainC.removeLibrary() // nothing of the run outlives it
// A missed target is reported (✗) in the table; it fails the run only with --strict, so a smoke
// run (CI's) checks that every suite runs, not this machine's speed that day.
exit(failed && options.strict ? 1 : 0)

// A Wormhole client for the integration tests and the benchmark: the library driven from another
// process, doing what the `wormhole` CLI does not (floods, coordinated updates, echoing).
// Container and bus come from DARWIN_NOTIFY_CONTAINER_ROOT and DARWIN_NOTIFY_BUS.
//
//   wormhole-probe flood GROUP ID WRITER COUNT [PAD] queue: pass {"w":WRITER,"i":0…COUNT-1} (and "p": PAD bytes)
//   wormhole-probe increment GROUP ID COUNT         coordinated: COUNT atomic increments of {"count"}
//   wormhole-probe echo GROUP IN OUT [nosync] [here]  file: each message on IN is passed back on OUT
//                                                    (here: from a listener with queue: nil)
//   wormhole-probe spin GROUP ID WRITER COUNT [count-urg]  file: pass {"w":WRITER,"i":0…COUNT-1,"p":…},
//                                                    "p" of 0-1,200 bytes (larger and smaller in turn);
//                                                    count-urg: with a SIGURG handler, the count printed
//   wormhole-probe drain GROUP ID COUNT              queue: print "ready", then "done" after COUNT messages
//   wormhole-probe in-memory PATH...                 "PATH true|false": whether a wormhole there takes
//                                                    its files for memory (tmpfs, ramfs: no fsync)
import Dispatch
import Foundation
import Synchronization
import Wormhole

let urgReceived = Atomic<Int>(0)

struct Tick: Codable, Sendable { var w: Int; var i: Int; var p: String? = nil }
struct Counter: Codable, Sendable { var count: Int }

func fail(_ text: String) -> Never {
    FileHandle.standardError.write(Data("wormhole-probe: \(text)\n".utf8))
    exit(1)
}

// Signals as a program started from a shell has them: a test harness spawns children with the
// mask of the thread that spawned them, which may block nearly everything (the lease's signal
// of SpareFile.swift must reach this process as it would reach any other).
var unblocked = sigset_t()
sigemptyset(&unblocked)
pthread_sigmask(SIG_SETMASK, &unblocked, nil)

let args = CommandLine.arguments
if args.count >= 3 && args[1] == "in-memory" {
    for path in args.dropFirst(2) { print("\(path) \(wormholeStorageIsInMemory(path))") }
    exit(0)
}
guard args.count >= 4 else { fail("usage: see the comment at the top of main.swift") }
do {
    switch args[1] {
    case "flood" where args.count == 6 || args.count == 7:
        let wormhole = try Wormhole(group: args[2], transiting: .queue)
        guard let writer = Int(args[4]), let count = Int(args[5]),
              let pad = args.count == 7 ? Int(args[6]) : 0, pad >= 0 else { fail("bad numbers") }
        let padding = pad > 0 ? String(repeating: "p", count: pad) : nil
        for i in 0..<count { try wormhole.pass(Tick(w: writer, i: i, p: padding), identifier: args[3]) }
        try wormhole.flush()
        print("done \(count)")
    case "spin" where args.count == 6 || (args.count == 7 && args[6] == "count-urg"):
        // count-urg: a host application with a SIGURG handler (Go's runtime has one, for
        // preemption), counting what reaches it while it passes.
        if args.count == 7 {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { _ in urgReceived.add(1, ordering: .relaxed) }
            action.sa_flags = SA_RESTART
            sigaction(SIGURG, &action, nil)
        }
        let wormhole = try Wormhole(group: args[2])
        guard let writer = Int(args[4]), let count = Int(args[5]) else { fail("bad numbers") }
        for i in 0..<count {
            try wormhole.pass(Tick(w: writer, i: i, p: String(repeating: "p", count: (i * 389) % 1201)), identifier: args[3])
        }
        print(args.count == 7 ? "done \(count) urg=\(urgReceived.load(ordering: .relaxed))" : "done \(count)")
    case "increment" where args.count == 5:
        let wormhole = try Wormhole(group: args[2], transiting: .coordinated)
        guard let count = Int(args[4]) else { fail("bad count") }
        for _ in 0..<count {
            try wormhole.update(args[3], as: Counter.self) { value in
                value = Counter(count: (value?.count ?? 0) + 1)
            }
        }
        print("done \(count)")
    case "echo" where args.count >= 5 && args.count <= 7:
        let options = args.dropFirst(5)
        let sync = !options.contains("nosync")
        let queue: DispatchQueue? = options.contains("here") ? nil : DispatchQueue(label: "echo")
        let wormhole = try Wormhole(group: args[2], configuration: WormholeConfiguration(syncToDisk: sync))
        let out = args[4]
        let listener = try wormhole.listen(for: args[3], queue: queue) { result in
            guard case .success(let message) = result else { return }
            do { try wormhole.pass(data: message.payload, identifier: out) } catch { fail("\(error)") }
        }
        FileHandle.standardOutput.write(Data("ready\n".utf8))
        while readLine() != nil {}
        listener.cancelAndWait()
    case "drain" where args.count == 5:
        let wormhole = try Wormhole(group: args[2], transiting: .queue)
        guard let count = Int(args[4]) else { fail("bad count") }
        let done = DispatchSemaphore(value: 0)
        let seen = Mutex(0)
        let listener = try wormhole.listen(for: args[3]) { result in
            guard case .success = result else { fail("\(result)") }
            if seen.withLock({ $0 += 1; return $0 }) == count { done.signal() }
        }
        FileHandle.standardOutput.write(Data("ready\n".utf8))
        done.wait()
        FileHandle.standardOutput.write(Data("done \(count)\n".utf8))
        listener.cancelAndWait()
    default:
        fail("unknown command \(args.dropFirst().joined(separator: " "))")
    }
} catch {
    fail("\(error)")
}

// notify-bridge: the command line of NotifyBridge (docs/BRIDGE.md). Only argument parsing and
// signals here; the bridge is in the library.
import ArgumentParser
import DarwinNotify
import Dispatch
import FoundationEssentials
import Glibc
import NotifyBridge

@main
struct NotifyBridgeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notify-bridge",
        abstract: "Carry Darwin notifications, state and wormhole messages between a local bus and an MQTT broker.",
        discussion: "SIGUSR1 prints the counters; SIGTERM or SIGINT stops (and prints them). See docs/BRIDGE.md.",
        version: "notify-bridge (DarwinNotify) \(darwinNotifyVersion)"
    )

    @Option(help: ArgumentHelp("The local bus: a D-Bus address, session, system or embedded (default: as notifyutil).", valueName: "address"))
    var bus: String?

    @Option(name: .customLong("broker"),
            help: ArgumentHelp("The broker: mqtt://HOST[:PORT] or mqtts://HOST[:PORT]. Repeat it, or give a comma-separated list, for the nodes of one cluster: one is used at a time, the next on a lost connection.", valueName: "url"))
    var brokers: [String] = []

    @Option(help: ArgumentHelp("The order the brokers are tried in: in-order (as listed) or random.", valueName: "order"))
    var brokerOrder: String?

    @Option(help: ArgumentHelp("Seconds an attempt may wait for the broker's answer (CONNACK) before the next broker is tried.", valueName: "seconds"))
    var connectTimeout: Double = 10

    @Flag(help: "Use TLS (implied by mqtts:// and by --tls-ca-file).")
    var tls = false

    @Option(name: .customLong("tls-ca-file"), help: ArgumentHelp("CA certificates (PEM) that sign the broker's certificate.", valueName: "file"))
    var caFile: String?

    @Option(name: .customLong("tls-ca-path"), help: ArgumentHelp("A directory of CA certificates (default /etc/ssl/certs).", valueName: "dir"))
    var caPath: String?

    @Option(name: .customLong("tls-cert"), help: ArgumentHelp("A client certificate (PEM), with --tls-key.", valueName: "file"))
    var certFile: String?

    @Option(name: .customLong("tls-key"), help: ArgumentHelp("The client certificate's key (PEM).", valueName: "file"))
    var keyFile: String?

    @Option(help: ArgumentHelp("The user name to give the broker.", valueName: "name"))
    var username: String?

    @Option(help: ArgumentHelp("A file whose first line is the broker password.", valueName: "file"))
    var passwordFile: String?

    @Option(help: ArgumentHelp("The MQTT client id (default: notify-bridge-HOST-UID-BUSHASH; keep it stable: the broker's session is kept under it).", valueName: "id"))
    var clientID: String?

    @Option(name: .customLong("export"), parsing: .upToNextOption,
            help: ArgumentHelp("Namespaces whose local posts and state go to the broker.", valueName: "namespace"))
    var exports: [String] = []

    @Option(name: .customLong("import"), parsing: .upToNextOption,
            help: ArgumentHelp("Namespaces whose posts and state from the broker are made locally.", valueName: "namespace"))
    var imports: [String] = []

    @Flag(help: "Import user.uid.N names: the broker's ACL lets only N's bridges publish them (docs/BRIDGE.md).")
    var brokerACLEnforced = false

    @Option(help: ArgumentHelp("Messages waiting for the broker's acknowledgement, at most; past it, new ones are dropped and reported.", valueName: "count"))
    var queueLimit = 100_000

    @Option(help: ArgumentHelp("Distinct state names imported from the broker, at most (each is a file here); past it, new ones are refused and counted.", valueName: "count"))
    var stateLimit = 10_000

    @Option(name: .customLong("wormhole"),
            help: ArgumentHelp("Mirror this wormhole group (file: retained per identifier; queue: QoS 1). Repeatable.", valueName: "group"))
    var wormholeGroups: [String] = []

    @Option(help: ArgumentHelp("The wormhole directory inside each group's container.", valueName: "name"))
    var wormholeDirectory = "wormhole"

    @Option(help: ArgumentHelp("The named queue listener the bridge reads wormhole queues as.", valueName: "name"))
    var wormholeListener = "notify-bridge"

    func run() throws {
        var arguments = BridgeArguments(brokers: brokers)
        arguments.brokerOrder = brokerOrder
        arguments.connectTimeout = connectTimeout
        arguments.bus = bus
        arguments.tls = tls
        arguments.caFile = caFile
        arguments.caPath = caPath
        arguments.certFile = certFile
        arguments.keyFile = keyFile
        arguments.username = username
        arguments.passwordFile = passwordFile
        arguments.clientID = clientID
        arguments.exports = exports
        arguments.imports = imports
        arguments.brokerACLEnforced = brokerACLEnforced
        arguments.queueLimit = queueLimit
        arguments.stateLimit = stateLimit
        arguments.wormholeGroups = wormholeGroups
        arguments.wormholeDirectory = wormholeDirectory
        arguments.wormholeListener = wormholeListener
        let bridge: Bridge
        do {
            bridge = try Bridge(configuration: arguments.configuration())
        } catch {
            Reporter.standardError("notify-bridge: \(error)\n")
            throw ExitCode(64) // the command line itself is wrong
        }
        // Before the start, whose first words ("connected", "retrying with backoff") tell a
        // supervisor it may signal us: a SIGTERM between the two was ignored and lost (the
        // disposition was SIG_IGN before the source listened), and the bridge ran on. Handlers run
        // on the main queue, so from dispatchMain on, once the start is over.
        Signals.install(bridge)
        do {
            try bridge.start()
        } catch {
            Reporter.standardError("notify-bridge: \(error)\n")
            throw ExitCode(1) // a right command that cannot run now (another bridge serves the bus, …)
        }
        dispatchMain()
    }
}

/// SIGUSR1: counters; SIGTERM, SIGINT: stop, counters, exit 0.
enum Signals {
    nonisolated(unsafe) static var sources: [DispatchSourceSignal] = [] // kept alive; main thread only

    static func install(_ bridge: Bridge) {
        for signal in [SIGUSR1, SIGTERM, SIGINT] {
            Glibc.signal(signal, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signal, queue: .main)
            source.setEventHandler {
                // Stopped first, so nothing the stop itself causes (the broker connection closing)
                // is reported after the final counters.
                if signal != SIGUSR1 { bridge.stop() }
                bridge.reporter.flush()
                bridge.reporter.say("stats \(bridge.currentCounters)")
                if signal != SIGUSR1 { Glibc.exit(0) }
            }
            source.resume()
            sources.append(source)
        }
    }
}

import ArgumentParser
import DarwinNotify
import FoundationEssentials
import Glibc
import Wormhole

/// `wormhole`: MMWormhole-style messages from the shell. The work is in the Wormhole library;
/// this file only maps arguments to it.
@main
struct WormholeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wormhole",
        abstract: "Pass messages with JSON payloads between processes through a group container.",
        version: "wormhole (DarwinNotify) \(darwinNotifyVersion)",
        subcommands: [Pass.self, Read.self, Listen.self, Clear.self, ClearAll.self, List.self]
    )

    // Declared here too, so they may come before the subcommand (`wormhole --transiting queue pass …`);
    // each subcommand's own `@OptionGroup` of the same type receives them.
    @OptionGroup var options: WormholeOptions

    /// A misspelt subcommand would otherwise be read as the root command's arguments ("4
    /// unexpected arguments"): name the nearest subcommand instead.
    static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if let word = SubcommandWord.find(in: arguments), let hint = SubcommandWord.suggestion(for: word) {
            printError("unknown subcommand '\(word)'. \(hint) (see wormhole --help)")
            Glibc.exit(64)
        }
        main(arguments)
    }
}

/// The first word of a command line that stands where a subcommand goes.
enum SubcommandWord {
    static let names = ["pass", "read", "listen", "clear", "clear-all", "list", "help"]
    /// Options of the root command that take a value (`--container DIR`).
    static let valued: Set<String> = ["--container", "--transiting", "--directory", "--bus", "--max-payload", "--share-with-group",
                                      "--generate-completion-script"] // argument-parser's own

    static func find(in arguments: [String]) -> String? {
        var i = 0
        while i < arguments.count {
            let arg = arguments[i]
            if valued.contains(arg) { i += 2; continue }
            if arg.hasPrefix("-") { i += 1; continue }
            return arg
        }
        return nil
    }

    /// "Did you mean 'pass'?" for a word within two edits of a subcommand; nil for a subcommand.
    static func suggestion(for word: String) -> String? {
        guard !names.contains(word) else { return nil }
        let nearest = names.map { ($0, distance(word, $0)) }.min { $0.1 < $1.1 }!
        return nearest.1 <= 2 ? "Did you mean '\(nearest.0)'?" : "Subcommands: \(names.dropLast().joined(separator: ", "))."
    }

    private static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var row = Array(0 ... b.count)
        for i in 1 ... max(a.count, 1) where !a.isEmpty {
            var previous = row[0]
            row[0] = i
            for j in 1 ... max(b.count, 1) where !b.isEmpty {
                let current = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] == b[j - 1] ? 0 : 1))
                previous = current
            }
        }
        return row[b.count]
    }
}

/// Options every subcommand takes; they may come before the subcommand name.
struct WormholeOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The group container directory (default: found from the group).", valueName: "DIR"))
    var container: String?

    @Option(help: "How messages travel: file (default), coordinated or queue.")
    var transiting: Transiting = .file

    @Option(help: ArgumentHelp("The wormhole's folder inside the container.", valueName: "NAME"))
    var directory: String = "wormhole"

    @Option(help: ArgumentHelp("The D-Bus address to use (default: DARWIN_NOTIFY_BUS; else the system bus when installed system-wide, see darwin-notify(7); else the embedded bus).", valueName: "ADDRESS"))
    var bus: String?

    @Option(help: ArgumentHelp("Refuse payloads larger than this many bytes.", valueName: "BYTES"))
    var maxPayload: Int = WormholeConfiguration().maxPayloadBytes

    @Option(help: ArgumentHelp("Share a new container with this Unix group (setgid, group-writable).", valueName: "GROUP"))
    var shareWithGroup: String?

    func validate() throws {
        guard maxPayload >= 0 else { throw ValidationError("--max-payload must be 0 or more") }
    }

    /// What a subcommand may do to a container that is not there yet.
    enum Need {
        /// Make it (pass).
        case create
        /// Refuse: reading or clearing a group that was never used must not make its folders.
        case existing
        /// Make it, and say so: a listener waits for the first pass.
        case waitForFirstPass
    }

    func open(_ group: String, _ need: Need = .create) throws -> Wormhole {
        if need != .create {
            let path = try container ?? GroupContainer.defaultPath(for: group)
            if !FileManager.default.fileExists(atPath: path) {
                switch need {
                case .existing where container != nil:
                    throw WormholeCLIError("--container \(path) does not exist (only pass creates a container)")
                case .existing:
                    throw WormholeCLIError("no container for group '\(group)': nothing was ever passed in it (\(path) does not exist)")
                default:
                    printError("no container for group '\(group)' yet: waiting for the first pass (it will be \(path))")
                }
            }
        }
        let center = try bus.map { try NotifyCenter(bus: $0) } ?? .default
        let sharing: GroupContainer.Sharing = shareWithGroup.map { .unixGroup($0) } ?? .privateToUser
        let container = try GroupContainer(group: group, directory: container, sharing: sharing)
        return try Wormhole(group: group, directory: directory, transiting: transiting, container: container,
                            configuration: WormholeConfiguration(maxPayloadBytes: maxPayload), center: center)
    }
}

extension Transiting: ExpressibleByArgument {}

/// The positional arguments that name a message.
struct MessageAddress: ParsableArguments {
    @Argument(help: "The group identifier (as an App Group: group.com.example.app).")
    var group: String

    @Argument(help: "The message identifier.")
    var identifier: String

    func validate() throws {
        try Wormhole.validateGroup(group)
        try Wormhole.validateIdentifier(identifier)
    }
}

extension WormholeCommand {
    struct Pass: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Pass a JSON message (from stdin when JSON is omitted).")
        @OptionGroup var options: WormholeOptions
        @OptionGroup var address: MessageAddress
        @Argument(help: "The JSON document to pass.")
        var json: String?

        func run() throws {
            let text = try json.map { Data($0.utf8) } ?? readStandardInput()
            if json == nil, text.allSatisfy({ $0 == 0x20 || $0 == 0x0a || $0 == 0x09 || $0 == 0x0d }) {
                throw WormholeCLIError("read nothing on standard input (no JSON argument was given, so the message is read from stdin); pass the JSON as an argument or pipe it in")
            }
            try JSONText.validate(text)
            let wormhole = try options.open(address.group)
            try wormhole.passJSON(text, identifier: address.identifier)
            // A queue on disk announces after its group's sync: done before the tool says it passed.
            try wormhole.flush()
        }
    }

    struct Read: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the current message as one line of JSON.")
        @OptionGroup var options: WormholeOptions
        @OptionGroup var address: MessageAddress
        @Flag(help: "Write the payload's bytes as they are (default: JSON as one line; binary data as base64).")
        var raw = false

        func run() throws {
            guard let message = try options.open(address.group, .existing).message(address.identifier) else {
                throw WormholeCLIError("no message for '\(address.identifier)'")
            }
            try printLine(message, raw: raw)
        }
    }

    struct Listen: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print each message passed from now on as one line of JSON.",
            discussion: "Prints 'listening' on stderr once registered. Damaged messages are reported on stderr and listening goes on.")
        @OptionGroup var options: WormholeOptions
        @OptionGroup var address: MessageAddress
        @Option(help: "Exit after this many messages.")
        var count: Int?
        @Option(help: ArgumentHelp("A durable listener name (queue transiting): resumes where it stopped.", valueName: "LISTENER"))
        var name: String?
        @Flag(help: "Write each payload's bytes as they are (default: JSON as one line; binary data as base64).")
        var raw = false

        func validate() throws {
            if let count, count < 1 { throw ValidationError("--count must be at least 1") }
            if name != nil, options.transiting != .queue { throw ValidationError("--name needs --transiting queue") }
        }

        func run() throws {
            let wormhole = try options.open(address.group, .waitForFirstPass)
            try listen(wormhole, identifier: address.identifier, name: name, count: count, raw: raw)
        }
    }

    struct Clear: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove the message(s) of an identifier.")
        @OptionGroup var options: WormholeOptions
        @OptionGroup var address: MessageAddress

        func run() throws { try options.open(address.group, .existing).clear(address.identifier) }
    }

    struct ClearAll: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "clear-all", abstract: "Remove every message of the wormhole.")
        @OptionGroup var options: WormholeOptions
        @Argument(help: "The group identifier.")
        var group: String

        func validate() throws { try Wormhole.validateGroup(group) }
        func run() throws { try options.open(group, .existing).clearAll() }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the identifiers that have messages, one per line.")
        @OptionGroup var options: WormholeOptions
        @Argument(help: "The group identifier.")
        var group: String

        func validate() throws { try Wormhole.validateGroup(group) }
        func run() throws {
            for identifier in try options.open(group, .existing).identifiers() { print(identifier) }
        }
    }
}

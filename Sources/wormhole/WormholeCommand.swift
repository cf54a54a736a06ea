import ArgumentParser
import DarwinNotify
import Foundation
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
}

/// Options every subcommand takes; they may come before the subcommand name.
struct WormholeOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The group container directory (default: found from the group).", valueName: "DIR"))
    var container: String?

    @Option(help: "How messages travel: file (default), coordinated or queue.")
    var transiting: Transiting = .file

    @Option(help: ArgumentHelp("The wormhole's folder inside the container.", valueName: "NAME"))
    var directory: String = "wormhole"

    @Option(help: ArgumentHelp("The D-Bus address to use (default: DARWIN_NOTIFY_BUS, else the embedded bus).", valueName: "ADDRESS"))
    var bus: String?

    @Option(help: ArgumentHelp("Refuse payloads larger than this many bytes.", valueName: "BYTES"))
    var maxPayload: Int = WormholeConfiguration().maxPayloadBytes

    @Option(help: ArgumentHelp("Share a new container with this Unix group (setgid, group-writable).", valueName: "GROUP"))
    var shareWithGroup: String?

    func validate() throws {
        guard maxPayload >= 0 else { throw ValidationError("--max-payload must be 0 or more") }
    }

    func open(_ group: String) throws -> Wormhole {
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
            let text = json.map { Data($0.utf8) } ?? FileHandle.standardInput.readDataToEndOfFile()
            try JSONText.validate(text)
            try options.open(address.group).passJSON(text, identifier: address.identifier)
        }
    }

    struct Read: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the current message as one line of JSON.")
        @OptionGroup var options: WormholeOptions
        @OptionGroup var address: MessageAddress

        func run() throws {
            guard let message = try options.open(address.group).message(address.identifier) else {
                throw WormholeCLIError("no message for '\(address.identifier)'")
            }
            try printLine(message)
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

        func validate() throws {
            if let count, count < 1 { throw ValidationError("--count must be at least 1") }
            if name != nil, options.transiting != .queue { throw ValidationError("--name needs --transiting queue") }
        }

        func run() throws {
            let wormhole = try options.open(address.group)
            try listen(wormhole, identifier: address.identifier, name: name, count: count)
        }
    }

    struct Clear: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove the message(s) of an identifier.")
        @OptionGroup var options: WormholeOptions
        @OptionGroup var address: MessageAddress

        func run() throws { try options.open(address.group).clear(address.identifier) }
    }

    struct ClearAll: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "clear-all", abstract: "Remove every message of the wormhole.")
        @OptionGroup var options: WormholeOptions
        @Argument(help: "The group identifier.")
        var group: String

        func validate() throws { try Wormhole.validateGroup(group) }
        func run() throws { try options.open(group).clearAll() }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the identifiers that have messages, one per line.")
        @OptionGroup var options: WormholeOptions
        @Argument(help: "The group identifier.")
        var group: String

        func validate() throws { try Wormhole.validateGroup(group) }
        func run() throws {
            for identifier in try options.open(group).identifiers() { print(identifier) }
        }
    }
}

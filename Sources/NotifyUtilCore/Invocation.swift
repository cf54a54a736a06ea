/// A parsed `notifyutil` command line. As in Apple's tool, options (`-q`, `-v`, `-z`, `-M`, `-R`,
/// `--bus`) apply to the whole run, and commands run left to right; a delivery switch (`-port`,
/// `-file`, `-check`, `-signal [#]`, `-dispatch`, `-plain`) applies to the registrations after it.
package struct Invocation: Equatable, Sendable {
    /// How a registration receives notifications (Apple's `notifyutil` types).
    package enum Delivery: Equatable, Sendable {
        /// Our default: a callback from the center (Apple: a Mach port).
        case port
        /// A pipe written for each post (`notify_register_file_descriptor`).
        case file
        /// Polled every 100 ms with `notify_check` (`notify_register_check`).
        case check
        /// A signal for each post (`notify_register_signal`); Apple's default signal is 1 (SIGHUP).
        case signal(Int32)
        /// A block on a dispatch queue (`notify_register_dispatch`).
        case dispatch
        /// Polled like `check` (`notify_register_plain`).
        case plain

        /// The word `-v` prints.
        package var typeName: String {
            switch self {
            case .port: "port"
            case .file: "file"
            case .check: "check"
            case .signal: "signal"
            case .dispatch: "dispatch"
            case .plain: "plain"
            }
        }
    }

    package enum Command: Equatable, Sendable {
        /// `-p key`
        case post(String)
        /// `-w key` (count nil: forever) or `-N key` (N notifications, then that registration ends)
        case wait(String, count: Int?, delivery: Delivery)
        /// `-g key`: print `key value`
        case get(String)
        /// `-s key value`
        case set(String, UInt64)
        /// `-W namespace` (forever) or `-WN namespace` (N posts): every post of the namespace and
        /// of the names under it, printed by full name (beyond Apple's tool)
        case waitNamespace(String, count: Int?)
        /// `--bus-status`, `--bus-start`, `--bus-stop`: the embedded bus
        case busStatus, busStart, busStop
        /// `--monitor`: every post on the bus, one line each, until the bus goes away
        case monitor
    }

    package enum Output: Equatable, Sendable { case quiet, key, verbose }

    package var commands: [Command] = []
    package var output: Output = .key
    /// Pause after each post, in milliseconds (Apple's default: 100).
    package var napMilliseconds = 100
    package var bus: String?
    package var showHelp = false
    /// `--version`: print the version and exit.
    package var showVersion = false
    /// `--json`: `--monitor` prints one JSON object per post.
    package var json = false

    package init() {}
}

/// A command line `notifyutil` cannot run: printed on one line with "see notifyutil -h", exit status 64 (EX_USAGE).
package struct UsageError: Error, Equatable, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// A name as error messages show it: quoted, and cut short past 64 bytes (a 512-byte name would
/// bury the message).
package func shownName(_ name: String) -> String {
    let bytes = Array(name.utf8)
    guard bytes.count > 64 else { return "'\(name)'" }
    return "'\(String(decoding: bytes.prefix(60), as: UTF8.self))…' (\(bytes.count) bytes)"
}

package enum InvocationParser {
    package static let usage = """
    usage: notifyutil [-q] [-v] [-z msec] [-M] [-R] [--bus ADDRESS] [command ...]
        -q             quiet mode
        -v             verbose - prints token, time, key, state value, and type
        -z msec        pause msec milliseconds after posting [default 100]
        -M             accepted for compatibility (notifications are always multiplexed)
        -R             accepted for compatibility (registrations always survive a bus restart)
        --bus ADDRESS  a D-Bus address, or session, system, embedded [default: $DARWIN_NOTIFY_BUS;
                       else the system bus when installed system-wide (darwin-notify(7));
                       else embedded]
    commands:
        -port          switch to callbacks for subsequent registrations [default]
        -file          switch to file descriptor for subsequent registrations
        -check         switch to polling notify_check for subsequent registrations
        -signal [#]    switch to signal [#] for subsequent registrations
                       initial default for signal is 1 (SIGHUP)
        -dispatch      switch to dispatch for subsequent registrations
        -plain         switch to plain (polled) registrations
        -p key         post a notification for key
        -w key         register for key and report notifications
        -# key         (# is an integer value, eg "-1") register for key and report # notifications
        -g key         get state value for key
        -s key val     set state value for key
        --bus-status   report whether the embedded bus runs, and its address
        --bus-start    start the embedded bus if it is not running
        -W namespace   print each post of the namespace and of every name under it, forever
        -WN namespace  the same, then exit after N posts (for example -W1 com.example)
        --bus-stop     stop the embedded bus
        --monitor      print every post on the bus: time, name, sender, pid, uid, sequence,
                       coalesced, gaps, and whether a DarwinNotify client or another D-Bus
                       client posted it
        --json         with --monitor: one JSON object per line
        --version      print the version and exit
    """

    package static func parse(_ arguments: [String]) throws(UsageError) -> Invocation {
        var result = Invocation()
        var delivery = Invocation.Delivery.port
        var signal: Int32 = 1
        var i = 0
        func operand(for flag: String, _ what: String) throws(UsageError) -> String {
            guard i + 1 < arguments.count else { throw UsageError("\(what) required following \(flag)") }
            i += 1
            return arguments[i]
        }
        while i < arguments.count {
            let arg = arguments[i]
            switch arg {
            case "-h", "-help", "--help": result.showHelp = true
            case "--version": result.showVersion = true
            case "-q": result.output = .quiet
            case "-v": result.output = .verbose
            case "-M", "-R": break
            case "-z":
                let value = try operand(for: arg, "timer value")
                guard let ms = Int(value), ms >= 0 else { throw UsageError("-z \(value) is invalid: timer value must be a non-negative integer") }
                result.napMilliseconds = ms
            case "--bus":
                let value = try operand(for: arg, "bus address")
                guard !value.isEmpty else { throw UsageError("--bus needs a non-empty address") }
                result.bus = value
            case "-port": delivery = .port
            case "-file": delivery = .file
            case "-check": delivery = .check
            case "-dispatch": delivery = .dispatch
            case "-plain": delivery = .plain
            case "-sig", "-signal":
                // As Apple's: an optional number follows; anything starting with '-' is not one.
                if i + 1 < arguments.count, !arguments[i + 1].hasPrefix("-") {
                    i += 1
                    guard let n = Int32(arguments[i]), n > 0 else {
                        throw UsageError("-signal \(arguments[i]) is invalid: signals must be specified as positive integer values")
                    }
                    signal = n
                }
                delivery = .signal(signal)
            case "-p": result.commands.append(.post(try operand(for: arg, "name")))
            case "-w": result.commands.append(.wait(try operand(for: arg, "name"), count: nil, delivery: delivery))
            case "-g": result.commands.append(.get(try operand(for: arg, "name")))
            case "-s":
                let name = try operand(for: arg, "name")
                let value = try operand(for: "-s \(name)", "value")
                guard let state = UInt64(value) ?? Int64(value).map({ UInt64(bitPattern: $0) }) else {
                    throw UsageError("value following -s \(shownName(name)) must be a 64-bit integer, not \(shownName(value))")
                }
                result.commands.append(.set(name, state))
            case "-W": result.commands.append(.waitNamespace(try operand(for: arg, "namespace"), count: nil))
            case "--monitor": result.commands.append(.monitor)
            case "--json": result.json = true
            case "--bus-status": result.commands.append(.busStatus)
            case "--bus-start": result.commands.append(.busStart)
            case "--bus-stop": result.commands.append(.busStop)
            default:
                if arg.hasPrefix("-W"), let n = Int(arg.dropFirst(2)), n >= 0 {
                    guard n > 0 else { throw UsageError("-W0 waits for no notification: use -W NAMESPACE to wait forever, or -WN NAMESPACE with N ≥ 1") }
                    result.commands.append(.waitNamespace(try operand(for: arg, "namespace"), count: n))
                } else if arg.count > 1, arg.hasPrefix("-"), let n = Int(arg.dropFirst()), n >= 0 {
                    // Apple's waits forever on -0, which a script never means: -w says that.
                    guard n > 0 else { throw UsageError("-0 waits for no notification: use -w NAME to wait forever, or -N NAME with N ≥ 1") }
                    let name = try operand(for: arg, "name")
                    result.commands.append(.wait(name, count: n, delivery: delivery))
                } else {
                    throw UsageError("unrecognized option: \(shownName(arg))")
                }
            }
            i += 1
        }
        return result
    }
}

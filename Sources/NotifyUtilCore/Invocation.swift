/// A parsed `notifyutil` command line. Like Apple's tool, options (`-q`, `-v`, `-z`, `-M`, `-R`,
/// `--bus`) apply to the whole run; commands run left to right.
public struct Invocation: Equatable, Sendable {
    public enum Command: Equatable, Sendable {
        /// `-p key`
        case post(String)
        /// `-w key` (count nil: forever) or `-N key` (N notifications, then that registration ends)
        case wait(String, count: Int?)
        /// `--bus-status`, `--bus-start`, `--bus-stop`: the embedded bus
        case busStatus, busStart, busStop
    }

    public enum Output: Equatable, Sendable { case quiet, key, verbose }

    public var commands: [Command] = []
    public var output: Output = .key
    /// Pause after each post that another command follows, in milliseconds (Apple's default: 100).
    public var napMilliseconds = 100
    public var bus: String?
    public var showHelp = false

    public init() {}
}

/// A command line `notifyutil` cannot run: printed with the usage, exit status 64 (EX_USAGE).
public struct UsageError: Error, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

public enum InvocationParser {
    public static let usage = """
    usage: notifyutil [-q] [-v] [-z msec] [-M] [-R] [--bus ADDRESS] [command ...]
        -q             quiet mode
        -v             verbose - prints token, time, key, state value, and type
        -z msec        pause msec milliseconds after posting [default 100]
        -M             accepted for compatibility (notifications are always multiplexed)
        -R             accepted for compatibility (registrations always survive a bus restart)
        --bus ADDRESS  a D-Bus address, or session, system, embedded [default: $DARWIN_NOTIFY_BUS, else embedded]
    commands:
        -p key         post a notification for key
        -w key         register for key and report notifications
        -# key         (# is an integer value, eg "-1") register for key and report # notifications
        --bus-status   report whether the embedded bus runs, and its address
        --bus-start    start the embedded bus if it is not running
        --bus-stop     stop the embedded bus
    """

    public static func parse(_ arguments: [String]) throws(UsageError) -> Invocation {
        var result = Invocation()
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
            case "-p": result.commands.append(.post(try operand(for: arg, "name")))
            case "-w": result.commands.append(.wait(try operand(for: arg, "name"), count: nil))
            case "--bus-status": result.commands.append(.busStatus)
            case "--bus-start": result.commands.append(.busStart)
            case "--bus-stop": result.commands.append(.busStop)
            default:
                if arg.count > 1, arg.hasPrefix("-"), let n = Int(arg.dropFirst()), n >= 0 {
                    let name = try operand(for: arg, "name")
                    // Apple: a count of 0 waits forever, like -w.
                    result.commands.append(.wait(name, count: n == 0 ? nil : n))
                } else {
                    throw UsageError("unrecognized option: \(arg)")
                }
            }
            i += 1
        }
        return result
    }
}

// notifyutil: Apple's notification utility on Linux. Parsing and running live in NotifyUtilCore.
import DarwinNotify
import NotifyUtilCore

#if canImport(Glibc)
import Glibc
#endif

let invocation: Invocation
do {
    invocation = try InvocationParser.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    // One line, as other Linux tools do; the whole usage is one `notifyutil -h` away.
    StandardStreams.err("notifyutil: \(error); see notifyutil -h\n")
    exit(64)
}
if invocation.showVersion {
    StandardStreams.out("notifyutil (DarwinNotify) \(darwinNotifyVersion)\n")
    exit(0)
}
if invocation.showHelp {
    StandardStreams.out(InvocationParser.usage + "\n")
    exit(0)
}
if invocation.commands.isEmpty {
    StandardStreams.err("notifyutil: no command given (such as -p NAME or -w NAME); see notifyutil -h\n")
    exit(64)
}
exit(Runner(invocation, out: StandardStreams.out, err: StandardStreams.err).run())

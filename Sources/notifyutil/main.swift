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
    StandardStreams.err("notifyutil: \(error)\n\(InvocationParser.usage)\n")
    exit(64)
}
if invocation.showVersion {
    StandardStreams.out("notifyutil (DarwinNotify) \(darwinNotifyVersion)\n")
    exit(0)
}
if invocation.showHelp || invocation.commands.isEmpty {
    (invocation.showHelp ? StandardStreams.out : StandardStreams.err)(InvocationParser.usage + "\n")
    exit(invocation.showHelp ? 0 : 64)
}
exit(Runner(invocation, out: StandardStreams.out, err: StandardStreams.err).run())

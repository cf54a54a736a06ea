// notifyutil: Apple's notification utility on Linux. Parsing and running live in NotifyUtilCore.
import DarwinNotify
import NotifyUtilCore
import CommandLineSupport

#if canImport(Glibc)
import Glibc
#endif

// Swift's CommandLine.arguments repairs bytes that are not UTF-8 (U+FFFD): a name typed with
// such bytes would be posted as another name. Refused here, as the C API refuses it.
for (index, raw) in UnsafeBufferPointer(start: CommandLine.unsafeArgv, count: Int(CommandLine.argc)).enumerated().dropFirst() {
    guard let raw, String(validatingCString: raw) == nil else { continue }
    let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(raw).assumingMemoryBound(to: UInt8.self), count: strlen(raw))
    let shown = bytes.map { $0 >= 0x20 && $0 < 0x7f ? String(UnicodeScalar($0)) : "\\x" + String($0, radix: 16) }.joined()
    StandardStreams.err("notifyutil: argument \(index) is not valid UTF-8 ('\(shown)'); names and values must be UTF-8\n")
    exit(64)
}

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

// swift-fuzz: the Swift readers of what another process or a broker writes, for libFuzzer (.ci/fuzz
// builds it with -sanitize=fuzzer,address and -DFUZZING, SWIFT_FUZZ_TARGET choosing the reader),
// beside the C core's fuzzers (Tests/Fuzz/fuzz_*.c). In any other build it replays files:
//   swift-fuzz message-file|queue-entry|bridge-payload FILE...   (prints how many it accepted)
// A finding is a trap: a reader that trapped, or one whose accepted input, written back, read as
// something else.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CommandLineSupport
import FoundationEssentials
import NotifyBridge
import Wormhole

enum FuzzTarget: String, CaseIterable {
    /// A wormhole message file (docs/PROTOCOL.md "Message file"): what any writer of the container leaves.
    case messageFile = "message-file"
    /// A queue segment's index entry, for a sequence.
    case queueEntry = "queue-entry"
    /// One MQTT message of a bridge (docs/BRIDGE.md "Payloads"): what anyone who may publish on the broker sends.
    case bridgePayload = "bridge-payload"

    /// Reads `bytes`; true when the reader accepted them.
    @discardableResult
    func run(_ bytes: UnsafeRawBufferPointer) -> Bool {
        switch self {
        case .messageFile: return WormholeFuzzing.messageFile(bytes)
        case .queueEntry: return WormholeFuzzing.queueEntry(bytes)
        case .bridgePayload:
            guard case .success(let payload) = BridgePayload.decode(bytes) else { return false }
            let again = payload.encoded().withUnsafeBytes { BridgePayload.decode($0) }
            precondition(again == .success(payload), "a bridge payload written back decodes to another")
            return true
        }
    }
}

#if FUZZING
let chosen: FuzzTarget = {
    guard let name = getenv("SWIFT_FUZZ_TARGET"), let target = FuzzTarget(rawValue: String(cString: name)) else {
        fatalError("SWIFT_FUZZ_TARGET: one of " + FuzzTarget.allCases.map(\.rawValue).joined(separator: ", "))
    }
    return target
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    chosen.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

/// libFuzzer's driver, for a `main` of our own.
@_silgen_name("LLVMFuzzerRunDriver")
func fuzzerRunDriver(_ argc: UnsafeMutablePointer<CInt>,
                     _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                     _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> CInt

/// SwiftPM's debug build links an executable's `main` to `<module>_main` (so that tests may
/// import it), which libFuzzer's own `main` does not provide: this one runs libFuzzer's driver.
@_cdecl("swift_fuzz_main")
public func swiftFuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var vector = argv
    return fuzzerRunDriver(&count, &vector, fuzzOne)
}
#else
@main
struct SwiftFuzz {
    static func main() {
        let args = CommandLine.arguments
        guard args.count >= 3, let target = FuzzTarget(rawValue: args[1]) else {
            StandardStreams.err("usage: swift-fuzz \(FuzzTarget.allCases.map(\.rawValue).joined(separator: "|")) FILE...\n")
            exit(64)
        }
        var accepted = 0
        for path in args.dropFirst(2) {
            let bytes: Data
            do { bytes = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
                let posix = (error as? CocoaError)?.underlying as? POSIXError
                StandardStreams.err("swift-fuzz: cannot read \(path): \(posix.map { String(cString: strerror($0.code.rawValue)) } ?? "\(error)")\n")
                exit(1)
            }
            if bytes.withUnsafeBytes({ target.run($0) }) { accepted += 1 }
        }
        StandardStreams.out("swift-fuzz: \(target.rawValue): \(args.count - 2) files, \(accepted) accepted, no finding\n")
    }
}
#endif

import Dispatch
import FoundationEssentials
import Synchronization
import SystemPackage
import Wormhole

/// A failure of the command itself (not of the library), printed as `Error: …` with exit 1.
struct WormholeCLIError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Prints a message, flushed at once (a pipe reader waits for it): a JSON message as one line;
/// a `data` message as one line of base64, with a note on stderr; with `raw`, the payload's bytes
/// as they are. A `json` message whose payload does not parse is reported as damaged.
func printLine(_ message: WormholeMessage, raw: Bool = false) throws {
    if raw {
        write(message.payload, to: .standardOutput)
        return
    }
    switch message.kind {
    case .json:
        guard let line = message.jsonLine() else {
            throw WormholeCLIError("message '\(message.identifier)' is marked JSON but its \(message.payload.count)-byte payload is damaged JSON (it does not parse); --raw prints its bytes")
        }
        write(Data((line + "\n").utf8), to: .standardOutput)
    case .data:
        printError("message '\(message.identifier)' is \(message.payload.count) bytes of binary data, printed as base64 (--raw writes the bytes)")
        write(Data((message.payload.base64EncodedString() + "\n").utf8), to: .standardOutput)
    }
}

func printError(_ text: String) {
    write(Data(("wormhole: " + text + "\n").utf8), to: .standardError)
}

/// Writes all of `bytes` (unbuffered: a pipe reader waits for each line). A closed pipe is not
/// worth a second error message: the write is given up.
func write(_ bytes: Data, to descriptor: FileDescriptor) {
    _ = try? bytes.withUnsafeBytes { try descriptor.writeAll($0) }
}

/// Standard input, all of it.
func readStandardInput() throws -> Data {
    var data = Data()
    var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    while true {
        let count = try buffer.withUnsafeMutableBytes { try FileDescriptor.standardInput.read(into: $0, retryOnInterrupt: true) }
        if count == 0 { return data }
        data.append(contentsOf: buffer[..<count])
    }
}

/// Listens until `count` messages were printed (forever without a count). The Nth message's
/// handler cancels the listener itself, so no message after it is taken from a queue, and the
/// cursor of a named listener is saved before the process exits.
func listen(_ wormhole: Wormhole, identifier: String, name: String?, count: Int?, raw: Bool = false) throws {
    let queue = DispatchQueue(label: "wormhole.listen")
    let done = DispatchSemaphore(value: 0)
    let printed = Mutex(0)
    let token = Mutex<WormholeListener?>(nil)
    // Registered from inside `queue`, so no handler runs before `token` is set.
    try queue.sync {
        let listener = try wormhole.listen(for: identifier, name: name, queue: queue) { result in
            switch result {
            case .success(let message):
                do { try printLine(message, raw: raw) } catch { printError("\(error)") }
            case .failure(let error):
                printError("\(error)")
                return
            }
            let reached = printed.withLock { n -> Bool in
                n += 1
                return count.map { n >= $0 } ?? false
            }
            if reached {
                token.withLock { $0?.cancel() }
                done.signal()
            }
        }
        token.withLock { $0 = listener }
    }
    printError("listening for \(wormhole.notificationName(for: identifier))")
    done.wait()
    token.withLock { $0 }?.cancelAndWait()
}

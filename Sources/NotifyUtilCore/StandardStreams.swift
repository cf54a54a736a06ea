#if canImport(Glibc)
import Glibc
#endif

/// Writes straight to file descriptors 1 and 2: unbuffered, so each line reaches a pipe at once
/// (tests and scripts read notifyutil's output line by line while it runs).
public enum StandardStreams {
    @Sendable public static func out(_ text: String) { write(text, to: 1) }
    @Sendable public static func err(_ text: String) { write(text, to: 2) }

    private static func write(_ text: String, to fd: Int32) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            bytes = bytes.dropFirst(n)
        }
    }
}

// CommandLineOutput.swift: what the package's command-line tools (notifyutil, distnotify) share to
// print: unbuffered writes to stdout and stderr, and JSON strings. A target of its own
// (CommandLineSupport), not a part of the DarwinNotify library; package-only: not Swift API.
#if canImport(Glibc)
import Glibc
#endif

/// Writes straight to file descriptors 1 and 2: unbuffered, so each line reaches a pipe at once
/// (tests and scripts read a tool's output line by line while it runs).
package enum StandardStreams {
    @Sendable package static func out(_ text: String) { write(text, to: 1) }
    @Sendable package static func err(_ text: String) { write(text, to: 2) }

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

/// A JSON string literal (RFC 8259): quotes, backslashes and control characters escaped, and C1
/// controls too, so a terminal shows no escape sequence a hostile name might carry.
package enum JSONString {
    package static func quoted(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 || (0x7F ... 0x9F).contains(scalar.value) {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}

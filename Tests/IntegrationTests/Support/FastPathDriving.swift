import Foundation

/// Driving a cnotify-probe fp-peer (a center commanded line by line) from a fast-path test:
/// FastPathTests and FastPathBoundsTests.
protocol FastPathDriving {}

extension FastPathDriving {
    /// Writes one command line and waits for the line that answers it.
    func command(_ child: ChildProcess, _ line: String, answer: (String) -> Bool) throws -> String {
        try child.write(line + "\n")
        return try child.waitForLine(timeout: 60, answer)
    }

    /// The fields of a fresh `stats` line.
    func stats(_ child: ChildProcess) throws -> [String: UInt64] {
        let before = child.lines.filter { $0.hasPrefix("stats ") }.count
        try child.write("stats\n")
        var line = ""
        try repeatUntil("a stats line", action: {}, done: {
            let all = child.lines.filter { $0.hasPrefix("stats ") }
            if all.count > before { line = all.last! }
            return all.count > before
        })
        var fields: [String: UInt64] = [:]
        for part in line.split(separator: " ").dropFirst() {
            let kv = part.split(separator: "=")
            if kv.count == 2, let v = UInt64(kv[1]) { fields[String(kv[0])] = v }
        }
        return fields
    }

    /// The sequence numbers an observer printed for `name`, in order.
    func received(_ child: ChildProcess, _ name: String) -> [UInt64] {
        child.lines.compactMap { line in
            let parts = line.split(separator: " ")
            guard parts.count == 3, parts[0] == "got", parts[1] == name[...] else { return nil }
            return UInt64(parts[2])
        }
    }

    /// The token of the endpoint process `pid` listens on (as root: its descriptors, matched with
    /// /proc/net/unix), once it listens: what an attacker on this host can read there too, but of
    /// this observer alone, so that tests running side by side do not attack each other's.
    func endpointToken(of pid: Int32) throws -> String {
        var token = ""
        try repeatUntil("process \(pid) to listen on an endpoint", action: {}, done: {
            let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
            let inodes = Set(fds.compactMap { fd -> String? in
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)"),
                      target.hasPrefix("socket:[") else { return nil }
                return String(target.dropFirst(8).dropLast())
            })
            // Read to its end: String(contentsOfFile:) gives the first page (4 KiB) of a /proc
            // file only, some 50 sockets of the host's (FastPathBoundsTests.endpointFoundInACrowd).
            let data = (try? FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/net/unix")).readToEnd()) ?? nil
            let table = data.map { String(decoding: $0, as: UTF8.self) } ?? ""
            for line in table.split(separator: "\n") {
                let columns = line.split(separator: " ")
                if columns.count >= 8, columns[3] == "00010000", inodes.contains(String(columns[6])),
                   columns[7].hasPrefix("@darwin-notify/fp/") {
                    token = String(columns[7].dropFirst("@darwin-notify/fp/".count))
                }
            }
            return !token.isEmpty
        })
        return token
    }
}

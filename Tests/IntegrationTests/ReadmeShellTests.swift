import Foundation
import Testing

/// Every shell block of README.md and Examples/README.md, pasted line by line into a sandbox: the
/// products built next to this test first on PATH, a private bus, private runtime, state and
/// container directories, and a scratch working directory that sees the repository's files. A
/// line passes if it exits 0, or, for a command documented to wait (-w, -N, listen, --monitor,
/// distnotify watch, notify-bridge, which runs until stopped), if it is
/// still waiting after a second. The few lines that would change the machine or are CI's own job
/// are listed below with where they are run instead.
extension IntegrationSuites {
    @Suite("README shell blocks", .serialized)
    struct ReadmeShellTests {
        static let root = BuildSuites.InstallTests.root

        /// Lines not pasted here, each with the test or job that runs it.
        static let elsewhere: [(prefix: String, reason: String)] = [
            ("bash .ci/install-deps && swift build && swift test", "CI's own job (.ci/run runs exactly this line)"),
            ("bash .ci/sanitize", "CI's sanitizer lane (.ci/run)"),
            ("bash .ci/fuzz 60 && bash .ci/soak 1000000", "CI's fuzzing lane and soak (.ci/run runs both, the fuzzers 15 s each instead of 60)"),
            ("swift build --package-path Examples", "ExamplesTests builds the Examples package"),
            ("bash .ci/apple-style", "CI's Apple-style lane (.ci/run runs exactly this line)"),
            ("make && sudo make install", "InstallTests (make, then make install with sudo's PATH into a staging root, and realInstall into /usr/local as root)"),
            ("systemctl --user", "InstallTests.socketActivation (needs a systemd user session)"),
            ("install -m 0644 docs/dbus", "changes the machine's system bus; the policy is tested by the system-like bus suites"),
            ("install -d -m", "changes the machine's /run; DefaultScopeTests use a state directory of their own"),
            ("dbus-send --system", "reloads the machine's system bus"),
            ("mkdir -p ~/.config/darwin-notify/launch.d", "writes your home; LaunchTests and ExamplesTests.refreshOnPost declare jobs in directories of their own"),
            ("darwin-notifyd --list --user", "asks your running launcher; LaunchTests run --list against theirs"),
        ]

        static func shellBlocks(_ file: String) throws -> [[String]] {
            let text = try String(contentsOfFile: root + "/" + file, encoding: .utf8)
            return text.components(separatedBy: "```sh\n").dropFirst().map {
                $0.components(separatedBy: "```")[0].split(separator: "\n").map(String.init)
            }
        }

        @Test("every README shell line works when pasted (or is run elsewhere, as listed)")
        func paste() throws {
            let bus = try TestBus()
            let sandbox = try makeTemporaryDirectory("readme")
            for entry in ["Shims", "Tests", "docs", "Examples", "VERSION", "Sources"] {
                try FileManager.default.createSymbolicLink(atPath: sandbox + "/" + entry, withDestinationPath: ReadmeShellTests.root + "/" + entry)
            }
            for dir in ["runtime", "containers"] { mkdir(sandbox + "/" + dir, 0o700) }
            let staged = try? BuildSuites.InstallTests.staged.get() // the install section's pkg-config line needs an installed .pc
            let env = bus.environment.merging([
                "PATH": ChildProcess.productsDirectory + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"),
                "XDG_RUNTIME_DIR": sandbox + "/runtime", "DARWIN_NOTIFY_CONTAINER_ROOT": sandbox + "/containers",
            ]) { $1 }
            // The install section's pkg-config line sees what the line before it installed: the
            // staging root of InstallTests, as if it were /usr.
            let installed = env.merging(["PKG_CONFIG_PATH": (staged ?? "/nonexistent") + "/usr/lib/pkgconfig",
                                         "PKG_CONFIG_SYSROOT_DIR": staged ?? ""]) { $1 }
            defer { _ = try? run("notifyutil", ["--bus-stop"], environment: env) }
            var ran = 0, elsewhere: [String] = []
            for file in ["README.md", "Examples/README.md"] {
                for block in try ReadmeShellTests.shellBlocks(file) {
                    for line in block where !line.trimmingCharacters(in: .whitespaces).isEmpty {
                        if let skip = ReadmeShellTests.elsewhere.first(where: { line.hasPrefix($0.prefix) }) {
                            elsewhere.append("\(line) — \(skip.reason)")
                            continue
                        }
                        // The first set-up command, as the built product (swift run would take the build lock).
                        let command = line.replacingOccurrences(of: "bash .ci/install-deps && swift build --product notifyutil-full && swift run ", with: "")
                        let child = try ChildProcess("/bin/sh", ["-c", "cd \"$0\" && " + command, sandbox],
                                                     environment: command.contains("--libs darwin-notify") ? installed : env)
                        let waits = command.range(of: #"(^|\s)-(w|W[0-9]*|[0-9]+)\s|\blisten\b|--monitor|^notify-bridge\s|^distnotify watch\s"#, options: .regularExpression) != nil
                        if child.exits(within: waits ? 1 : 60) {
                            let status = try child.waitForExit()
                            let ok = status == 0 || (command.hasPrefix("notifyutil --bus-status") && status == 3)
                            #expect(ok, "\(file): `\(line)` exited \(status): \(child.stderr)")
                        } else {
                            #expect(waits, "\(file): `\(line)` did not finish within 60 s")
                            child.kill()
                        }
                        ran += 1
                    }
                }
            }
            #expect(ran >= 25, "pasted \(ran) lines")
            print("README shell lines pasted: \(ran); run elsewhere:\n  " + elsewhere.joined(separator: "\n  "))
        }

        @Test("the README's C block compiles as written")
        func cBlock() throws {
            let text = try String(contentsOfFile: ReadmeShellTests.root + "/README.md", encoding: .utf8)
            let blocks = text.components(separatedBy: "```c\n").dropFirst().map { $0.components(separatedBy: "```")[0] }
            #expect(!blocks.isEmpty)
            let dir = try makeTemporaryDirectory("readme-c")
            for (i, block) in blocks.enumerated() {
                let file = dir + "/block\(i).c"
                try (block + "\nint main(void) { return 0; }\n").write(toFile: file, atomically: true, encoding: .utf8)
                let cc = try run("/usr/bin/cc", ["-fsyntax-only", "-Wall", "-Werror", "-I", ReadmeShellTests.root + "/Shims/CNotify/include", file])
                #expect(cc.status == 0, "README C block \(i): \(cc.err)")
            }
        }
    }
}

import CNotify
import Foundation
import Testing

/// Security round 3 (issue 19, items 1, 2, 11 and the scan of 14) and trust round 3 (issue 20,
/// item 1): whatever other users put in a shared state directory, or whoever made it first, a set
/// succeeds, a get reads 0 for what it cannot believe, and no value is discarded silently.
extension IntegrationSuites {
    @Suite("Hardening: state directories nobody can squat", .serialized, .enabled(if: geteuid() == 0, "needs root to run other uids"))
    struct StateSquattingTests {
        let bus: SystemLikeBus
        init() throws { bus = try SystemLikeBus() }

        /// Runs `executable` as `uid` with exactly `environment` (plus a PATH and HOME).
        func runAs(_ uid: UInt32, _ executable: String, _ arguments: [String], environment: [String: String], timeout: TimeInterval = 30)
            throws -> (status: Int32, out: String, err: String) {
            try bus.runAs(uid, executable, arguments, exactly: environment, timeout: timeout)
        }

        var stateDir: String { bus.directory + "/state" }

        func plainFile(_ name: String) -> String {
            var file = [CChar](repeating: 0, count: 33)
            CNotify_state_file_name(name, &file)
            return stateDir + "/plain/" + cString(file)
        }

        @Test("32,768 squatted temporary names and a 0644 file of another user block no set (item 1)")
        func squattedTemporaryNames() throws {
            #expect(try runAs(0, "notifyutil", ["-s", "com.ex.keep", "1"], environment: bus.environment).status == 0)
            let plain = stateDir + "/plain"
            // Every name the old writer would try: .tmp.<pid>.0 for every pid, made by nobody.
            let squat = try runAs(SystemLikeBus.nobody, "/bin/bash", ["-c", "cd '\(plain)' && touch .tmp.{1..32768}.0"],
                                  environment: [:])
            #expect(squat.status == 0, "\(squat.err)")
            // Someone else's 0644 file renamed over an existing name's file.
            let keep = plainFile("com.ex.keep")
            #expect(try runAs(SystemLikeBus.nobody, "/bin/sh", ["-c", "printf 'xxxxxxxxcom.ex.keep' > '\(plain)/.mine' && chmod 644 '\(plain)/.mine' && mv '\(plain)/.mine' '\(keep)'"],
                              environment: [:]).status == 0)
            for uid in [0, SystemLikeBus.nobody, SystemLikeBus.third] {
                let new = try runAs(uid, "notifyutil", ["-s", "com.ex.new\(uid)", "5"], environment: bus.environment)
                #expect(new.status == 0, "uid \(uid): \(new.err)")
                let kept = try runAs(uid, "notifyutil", ["-s", "com.ex.keep", "\(uid + 3)"], environment: bus.environment)
                #expect(kept.status == 0, "uid \(uid): \(kept.err)")
                #expect(try runAs(0, "notifyutil", ["-g", "com.ex.keep"], environment: bus.environment).out == "com.ex.keep \(uid + 3)\n")
            }
            #expect(try runAs(0, "notifyutil", ["-g", "com.ex.new65534"], environment: bus.environment).out == "com.ex.new65534 5\n")
        }

        @Test("a planted unreadable file reads as 0, and a set replaces it (item 2)")
        func unreadableFileReadsAsZero() throws {
            #expect(try runAs(0, "notifyutil", ["-s", "com.ex.other", "1"], environment: bus.environment).status == 0) // makes plain/
            let file = plainFile("com.ex.hidden")
            #expect(try runAs(SystemLikeBus.nobody, "/bin/sh", ["-c", "printf 'xxxxxxxxcom.ex.hidden' > '\(file)' && chmod 600 '\(file)'"],
                              environment: [:]).status == 0)
            let get = try runAs(SystemLikeBus.third, "notifyutil", ["-g", "com.ex.hidden"], environment: bus.environment)
            #expect(get.status == 0 && get.out == "com.ex.hidden 0\n", "\(get.status) \(get.out) \(get.err)")
            #expect(try runAs(SystemLikeBus.third, "notifyutil", ["-s", "com.ex.hidden", "8"], environment: bus.environment).status == 0)
            #expect(try runAs(SystemLikeBus.nobody, "notifyutil", ["-g", "com.ex.hidden"], environment: bus.environment).out == "com.ex.hidden 8\n")
        }

        @Test("whoever made the predictable state directory first, or locks it later, denies nobody (item 11)")
        func predictableDirectoryFirstComer() throws {
            // No DARWIN_NOTIFY_STATE_DIR: the bus's predictable /tmp directory.
            let env = ["DARWIN_NOTIFY_BUS": bus.address]
            // docs/PROTOCOL.md, "State files" 4: computed here, not asked of the library, whose
            // answer follows this process's own DARWIN_NOTIFY_STATE_DIR, if it has one.
            var hash: UInt64 = 14695981039346656037
            for byte in bus.address.utf8 { hash = (hash ^ UInt64(byte)) &* 1099511628211 }
            let hex = String(hash, radix: 16)
            let predictable = "/tmp/darwin-notify-state-" + String(repeating: "0", count: 16 - hex.count) + hex
            defer { removeAll(matching: predictable) }
            #expect(try runAs(SystemLikeBus.nobody, "notifyutil", ["-s", "sq.first", "1"], environment: env).status == 0)
            for (uid, name) in [(UInt32(0), "user.uid.0.x"), (SystemLikeBus.third, "sq.third"), (0, "sq.root")] {
                let r = try runAs(uid, "notifyutil", ["-s", name, "2"], environment: env)
                #expect(r.status == 0, "uid \(uid) \(name): \(r.err)")
            }
            #expect(try runAs(SystemLikeBus.third, "notifyutil", ["-g", "sq.first"], environment: env).out == "sq.first 1\n")
            // Its maker locks it: everyone moves to one other directory, says so, and agrees.
            #expect(try runAs(SystemLikeBus.nobody, "/bin/chmod", ["0700", predictable], environment: [:]).status == 0)
            let moved = try runAs(SystemLikeBus.third, "notifyutil", ["-s", "sq.after", "3"], environment: env)
            #expect(moved.status == 0 && moved.err.contains("using \(predictable)."), "\(moved.err)")
            #expect(try runAs(0, "notifyutil", ["-g", "sq.after"], environment: env).out == "sq.after 3\n")
            #expect(try runAs(0, "notifyutil", ["-s", "user.uid.0.y", "4"], environment: env).status == 0)
            #expect(try runAs(SystemLikeBus.third, "notifyutil", ["-g", "user.uid.0.y"], environment: env).out == "user.uid.0.y 4\n")
        }

        @Test("a doc-literal private state directory keeps its values; a plain/ we cannot use is refused with its fix (issue 20 item 1)")
        func privatePlainDirectoryKeepsValues() throws {
            let dir = try makeTemporaryDirectory("private-state")
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let env = ["DARWIN_NOTIFY_BUS": bus.address, "DARWIN_NOTIFY_STATE_DIR": dir + "/state"]
            #expect(try runAs(0, "notifyutil", ["-s", "priv.x", "11"], environment: env).status == 0)
            chmod(dir + "/state/plain", 0o777) // as PROTOCOL.md used to say
            #expect(try runAs(0, "notifyutil", ["-g", "priv.x"], environment: env).out == "priv.x 11\n")
            #expect(try runAs(0, "notifyutil", ["-s", "priv.y", "12"], environment: env).status == 0)
            #expect(try runAs(0, "notifyutil", ["-g", "priv.x"], environment: env).out == "priv.x 11\n")
            // A shared directory: a plain/ of ours in mode 0755 is repaired, its values kept.
            let shared = stateDir
            #expect(try runAs(0, "notifyutil", ["-s", "shared.x", "21"], environment: bus.environment).status == 0)
            chmod(shared + "/plain", 0o755)
            #expect(try runAs(0, "notifyutil", ["-g", "shared.x"], environment: bus.environment).out == "shared.x 21\n")
            #expect(try runAs(SystemLikeBus.nobody, "notifyutil", ["-s", "shared.y", "22"], environment: bus.environment).status == 0)
            #expect(try runAs(0, "notifyutil", ["-g", "shared.x"], environment: bus.environment).out == "shared.x 21\n")
            // A private directory whose plain/ is root's and closed to us: refused, with the fix, data left.
            let mine = try makeTemporaryDirectory("private-other")
            defer { try? FileManager.default.removeItem(atPath: mine) }
            chown(mine, SystemLikeBus.nobody, SystemLikeBus.nobody)
            let env2 = ["DARWIN_NOTIFY_BUS": bus.address, "DARWIN_NOTIFY_STATE_DIR": mine + "/state"]
            #expect(try runAs(SystemLikeBus.nobody, "notifyutil", ["-s", "p.v", "5"], environment: env2).status == 0)
            chown(mine + "/state/plain", 0, 0)
            chmod(mine + "/state/plain", 0o755)
            let refused = try runAs(SystemLikeBus.nobody, "notifyutil", ["-g", "p.v"], environment: env2)
            #expect(refused.status != 0 && refused.err.contains("chmod 0777 \(mine)/state/plain"), "\(refused.err)")
            #expect(FileManager.default.fileExists(atPath: mine + "/state/plain"))
            #expect(!(try FileManager.default.contentsOfDirectory(atPath: mine + "/state")).contains { $0.hasPrefix(".stale") })
        }

        @Test("30,000 planted uid.N.* entries cost one scan per process, not one per get (item 14)")
        func plantedUidDirectoriesAreScannedOnce() throws {
            let n = SystemLikeBus.third
            // uid.N squatted by nobody, then N makes its own uid.N.XXXXXX, then 30,000 decoys.
            #expect(try runAs(SystemLikeBus.nobody, "/bin/mkdir", ["-m", "0777", stateDir + "/uid.\(n)"], environment: [:]).status == 0)
            #expect(try runAs(n, "notifyutil", ["-s", "user.uid.\(n).v", "6"], environment: bus.environment).status == 0)
            let plant = try runAs(SystemLikeBus.nobody, "/bin/bash", ["-c", "cd '\(stateDir)' && mkdir uid.\(n).{0..29999}"],
                                  environment: [:], timeout: 120)
            #expect(plant.status == 0, "\(plant.err)")
            // One process, 200 gets: the core's test hook says each time it reads D to find uid N's directory.
            let probe = try runAs(n, "cnotify-probe", ["state", "get-many", "user.uid.\(n).v", "200"],
                                  environment: bus.environment.merging(["DARWIN_NOTIFY_TEST_REPORT_SCANS": "1"]) { $1 })
            #expect(probe.status == 0, "\(probe.err)")
            #expect(probe.out.contains("values=6"), "\(probe.out)")
            let scans = probe.err.components(separatedBy: "darwin-notify-test: scanned").count - 1
            #expect(scans == 1, "\(scans) scans for 200 gets")
        }

        @Test("another user's /tmp/darwin-notify-N (a directory or a link) does not keep N off its embedded bus (item 5)")
        func squattedRuntimeDirectory() throws {
            let n = SystemLikeBus.third
            let primary = "/tmp/darwin-notify-\(n)"
            removeAll(matching: primary)
            defer {
                _ = try? runAs(n, "notifyutil", ["--bus-stop"], environment: [:])
                removeAll(matching: primary)
            }
            // A status query creates nothing (issue 20 item 4).
            #expect(try runAs(n, "notifyutil", ["--bus-status"], environment: [:]).status == 3)
            #expect(!FileManager.default.fileExists(atPath: primary))
            for squat in [["/bin/mkdir", "-m", "0777", primary], ["/bin/ln", "-s", "/tmp", primary]] {
                removeAll(matching: primary)
                #expect(try runAs(SystemLikeBus.nobody, squat[0], Array(squat.dropFirst()), environment: [:]).status == 0)
                let started = try runAs(n, "notifyutil", ["--bus-start"], environment: [:])
                #expect(started.status == 0 && started.out.hasPrefix("unix:path=\(primary)."), "\(started.out) \(started.err)")
                #expect(started.err.contains("using \(primary)."), "\(started.err)")
                let posted = try runAs(n, "notifyutil", ["-v", "-1", "com.example.squat", "-p", "com.example.squat"], environment: [:])
                #expect(posted.status == 0 && posted.out.contains("com.example.squat"), "\(posted.out) \(posted.err)")
                let status = try runAs(n, "notifyutil", ["--bus-status"], environment: [:])
                #expect(status.status == 0 && status.out.hasPrefix("running unix:path=\(primary)."), "\(status.out)")
                #expect(try runAs(n, "notifyutil", ["--bus-stop"], environment: [:]).status == 0)
            }
            // Our own directory that others may write to is refused, and --bus-stop says so.
            removeAll(matching: primary)
            #expect(try runAs(n, "/bin/mkdir", ["-m", "0777", primary], environment: [:]).status == 0)
            chmod(primary, 0o777)
            let stop = try runAs(n, "notifyutil", ["--bus-stop"], environment: [:])
            #expect(stop.status != 0 && stop.err.contains("others can write"), "\(stop.status) \(stop.out) \(stop.err)")
        }

        private func removeAll(matching path: String) {
            let parent = (path as NSString).deletingLastPathComponent, base = (path as NSString).lastPathComponent
            for entry in (try? FileManager.default.contentsOfDirectory(atPath: parent)) ?? [] where entry == base || entry.hasPrefix(base + ".") {
                try? FileManager.default.removeItem(atPath: parent + "/" + entry)
            }
        }
    }
}

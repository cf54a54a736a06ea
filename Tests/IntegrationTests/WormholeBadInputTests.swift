import Dispatch
import Foundation
import Synchronization
import Testing
import Wormhole

/// Bad input to the wormhole: a clear error, nothing lost, never a crash.
extension IntegrationSuites {
    @Suite("Wormhole bad input", .serialized)
    struct WormholeBadInputTests {
        let fixture: WormholeFixture
        init() throws { fixture = try WormholeFixture() }

        @Test("bad identifiers and groups are refused by the CLI with a message and a non-zero exit", arguments: [
            ("", "is empty"), ("a/b", "contains '/'"), ("..", "contains '..'"), ("x..y", "contains '..'"),
            (String(repeating: "i", count: 256), "the limit is 255"), ("line\nbreak", "control character"),
            (".hidden", "starts with '.'"),
        ])
        func badIdentifiers(identifier: String, reason: String) throws {
            for args in [["pass", "group.test", identifier, "1"], ["read", "group.test", identifier],
                         ["listen", "group.test", identifier, "--count", "1"], ["clear", "group.test", identifier]] {
                let result = try fixture.cli(args)
                #expect(result.status != 0, "\(args) succeeded")
                #expect(result.err.contains(reason), "\(args): \(result.err)")
            }
            #expect(try fixture.cli(["pass", "group.test", String(repeating: "i", count: 255), "1"]).status == 0)
        }

        @Test("an identifier with NUL and a bad group are refused by the API")
        func nulAndGroups() throws {
            let wormhole = try fixture.wormhole()
            #expect { try wormhole.pass(1, identifier: "a\0b") } throws: { ($0 as? WormholeError)?.code == .invalidIdentifier }
            for group in ["", "has space", "../escape", ".dot", String(repeating: "g", count: 129)] {
                #expect { try fixture.wormhole(group) } throws: { ($0 as? WormholeError)?.code == .invalidGroup }
                let result = try fixture.cli(["pass", group, "id", "1"])
                #expect(result.status != 0 && result.err.contains("group identifier"), "\(group): \(result.err)")
            }
        }

        @Test("a payload over the limit or invalid JSON writes nothing; the previous message stays")
        func oversizeAndInvalidJSON() throws {
            try fixture.cliOK(["pass", "group.test", "doc", "{\"v\":1}"])
            let big = "\"" + String(repeating: "x", count: 100) + "\""
            let tooBig = try fixture.cli(["--max-payload", "64", "pass", "group.test", "doc", big])
            #expect(tooBig.status != 0 && tooBig.err.contains("over the limit of 64"), "\(tooBig.err)")
            for bad in ["{bad", "", "[1,", "{\"a\":}"] {
                let result = try fixture.cli(["pass", "group.test", "doc", bad])
                #expect(result.status != 0 && result.err.contains("not valid JSON"), "\(bad): \(result.err)")
            }
            #expect(try fixture.cliOK(["read", "group.test", "doc"]) == "{\"v\":1}\n")
            var small = WormholeConfiguration()
            small.maxPayloadBytes = 10
            let wormhole = try fixture.wormhole(configuration: small)
            #expect { try wormhole.pass(data: Data(count: 11), identifier: "doc") } throws: {
                ($0 as? WormholeError)?.code == .payloadTooLarge
            }
            #expect(try wormhole.message("doc", as: [String: Int].self) == ["v": 1])
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: wormhole.container.path + "/wormhole/messages")
            #expect(leftovers == ["doc"])
        }

        @Test("damaged message files are quarantined with a typed error", arguments: ["garbage", "truncated", "other type"])
        func damagedFiles(kind: String) throws {
            let wormhole = try fixture.wormhole()
            try wormhole.pass(["key": "a value long enough to cut"], identifier: "doc")
            let path = wormhole.container.path + "/wormhole/messages/doc"
            let good = try Data(contentsOf: URL(fileURLWithPath: path))
            let damaged: Data = switch kind {
            case "garbage": Data((0..<200).map { UInt8(truncatingIfNeeded: $0 &* 37) })
            case "truncated": good.prefix(good.count - 5)
            default: Data([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]) + Data(count: 64)  // a PNG
            }
            try damaged.write(to: URL(fileURLWithPath: path))
            let result = try fixture.cli(["read", "group.test", "doc"])
            #expect(result.status != 0 && result.err.contains("damaged") && result.err.contains("quarantine"), "\(result.err)")
            #expect(!FileManager.default.fileExists(atPath: path))
            let quarantine = wormhole.container.path + "/wormhole/quarantine/doc"
            let moved = try FileManager.default.contentsOfDirectory(atPath: quarantine)
            #expect(moved.count == 1)
            #expect(try Data(contentsOf: URL(fileURLWithPath: quarantine + "/" + moved[0])) == damaged)
            // The API reports the same with the code and the new path.
            try damaged.write(to: URL(fileURLWithPath: path))
            do {
                _ = try wormhole.message("doc")
                Issue.record("a damaged file was read")
            } catch {
                #expect(error.code == .corruptMessage)
                #expect(error.quarantinedPath.map { FileManager.default.fileExists(atPath: $0) } == true)
            }
        }

        @Test("operations the transiting does not offer are refused with .unsupported")
        func unsupportedOperations() throws {
            let file = try fixture.wormhole()
            #expect { try file.update("x", as: Int.self) { $0 = 1 } } throws: { ($0 as? WormholeError)?.code == .unsupported }
            #expect { try file.listen(for: "x", name: "durable") { _ in } } throws: { ($0 as? WormholeError)?.code == .unsupported }
            let cli = try fixture.cli(["listen", "group.test", "x", "--name", "durable"])
            #expect(cli.status != 0 && cli.err.contains("--name needs --transiting queue"), "\(cli.err)")
        }

        @Test("a message of another Codable type is a decoding error and stays in place")
        func wrongType() throws {
            struct Point: Codable { var x: Int; var y: Int }
            let wormhole = try fixture.wormhole()
            try wormhole.pass(["not": "a point"], identifier: "shape")
            #expect { try wormhole.message("shape", as: Point.self) } throws: { ($0 as? WormholeError)?.code == .decodingFailed }
            #expect(try wormhole.message("shape", as: [String: String].self) == ["not": "a point"])
        }

        @Test("a listener gets the error for a damaged file and keeps running")
        func listenerSurvivesDamage() throws {
            let wormhole = try fixture.wormhole()
            let listener = try fixture.listener(["listen", "group.test", "doc", "--count", "1"])
            try Data("not a message at all".utf8).write(to: URL(fileURLWithPath: wormhole.container.path + "/wormhole/messages/doc"))
            try notifyutilPost([wormhole.notificationName(for: "doc")], bus: fixture.bus)
            try listener.waitForStderr("damaged")
            try fixture.cliOK(["pass", "group.test", "doc", "\"fine\""])
            #expect(try listener.waitForExit() == 0)
            #expect(listener.lines == ["\"fine\""])
            // The same through the Swift API: a failure, then the next message.
            let results = Mutex<[Result<String, WormholeError>]>([])
            let arrived = DispatchSemaphore(value: 0)
            let token = try wormhole.listen(for: "doc", as: String.self) { result in
                results.withLock { $0.append(result) }
                arrived.signal()
            }
            try Data("garbage".utf8).write(to: URL(fileURLWithPath: wormhole.container.path + "/wormhole/messages/doc"))
            try notifyutilPost([wormhole.notificationName(for: "doc")], bus: fixture.bus)
            #expect(arrived.wait(timeout: .now() + 20) == .success)
            try wormhole.pass("after", identifier: "doc")
            #expect(arrived.wait(timeout: .now() + 20) == .success)
            token.cancelAndWait()
            let got = results.withLock { $0 }
            #expect((try? got.last?.get()) == "after")
            if case .failure(let error) = got.first { #expect(error.code == .corruptMessage) } else { Issue.record("no failure first: \(got)") }
        }

        @Test("unsafe containers are refused: a symlink, mode 777, group-writable, another owner")
        func unsafeContainers() throws {
            let root = fixture.root
            let real = root + "/real"
            try FileManager.default.createDirectory(atPath: real, withIntermediateDirectories: true)
            chmod(real, 0o700)
            try FileManager.default.createSymbolicLink(atPath: root + "/group.link", withDestinationPath: real)
            let link = try fixture.cli(["pass", "group.link", "id", "1"])
            #expect(link.status != 0 && link.err.contains("symbolic link"), "\(link.err)")

            try fixture.cliOK(["pass", "group.open", "id", "1"])
            chmod(root + "/group.open", 0o777)
            let open = try fixture.cli(["read", "group.open", "id"])
            #expect(open.status != 0 && open.err.contains("writable by every user"), "\(open.err)")
            chmod(root + "/group.open", 0o770)
            let groupWritable = try fixture.cli(["read", "group.open", "id"])
            #expect(groupWritable.status != 0 && groupWritable.err.contains("group-writable"), "\(groupWritable.err)")
            chmod(root + "/group.open", 0o700)
            #expect(try fixture.cliOK(["read", "group.open", "id"]) == "1\n")

            let explicit = try fixture.cli(["--container", root + "/group.link", "read", "group.x", "id"])
            #expect(explicit.status != 0 && explicit.err.contains("symbolic link"), "\(explicit.err)")

            // Another owner: only root can hand a directory to someone else (CI runs as root).
            try FileManager.default.createDirectory(atPath: root + "/group.theirs", withIntermediateDirectories: false)
            chmod(root + "/group.theirs", 0o700)
            if geteuid() == 0 {
                #expect(chown(root + "/group.theirs", 65534, 65534) == 0)
                let theirs = try fixture.cli(["pass", "group.theirs", "id", "1"])
                #expect(theirs.status != 0 && theirs.err.contains("owned by uid 65534"), "\(theirs.err)")
            }
        }

        @Test("a shared container is setgid and group-writable for its Unix group")
        func sharedContainer() throws {
            guard let group = getgrgid(getegid()) else { throw TestFailure("no group entry for gid \(getegid())") }
            let name = String(cString: group.pointee.gr_name)
            try fixture.cliOK(["--share-with-group", name, "pass", "group.shared", "id", "1"])
            var info = stat()
            #expect(lstat(fixture.root + "/group.shared", &info) == 0)
            #expect(info.st_mode & 0o7777 == 0o2770)
            #expect(info.st_gid == getegid())
            #expect(lstat(fixture.root + "/group.shared/wormhole/messages/id", &info) == 0)
            #expect(info.st_mode & 0o777 == 0o660)
            #expect(try fixture.cliOK(["--share-with-group", name, "read", "group.shared", "id"]) == "1\n")
            let unknown = try fixture.cli(["--share-with-group", "no-such-group-here", "pass", "group.other", "id", "1"])
            #expect(unknown.status != 0 && unknown.err.contains("no Unix group"), "\(unknown.err)")
        }

        @Test("a full disk fails the pass with .diskFull and leaves the previous message intact")
        func fullDisk() throws {
            let mountPoint = try makeTemporaryDirectory("full")
            defer { try? FileManager.default.removeItem(atPath: mountPoint) }
            let mounted = geteuid() == 0
                && (try? run("/bin/mount", ["-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", mountPoint]).status) == 0
            defer { if mounted { _ = try? run("/bin/umount", [mountPoint]) } }
            let container = mountPoint + "/group.full"
            try fixture.cliOK(["--container", container, "pass", "group.full", "doc", "{\"version\":1}"])
            let huge = "\"" + String(repeating: "z", count: 400_000) + "\""
            // Too long for an argument: through stdin.
            let child = if mounted {
                try ChildProcess("wormhole", ["--container", container, "pass", "group.full", "doc"],
                                 environment: fixture.environment, stdin: true)
            } else {
                // Not root: the file-size limit stands in for the full disk (EFBIG instead of ENOSPC).
                try ChildProcess("/bin/sh", ["-c", "trap '' XFSZ; ulimit -f 100; exec \"$0\" \"$@\"",
                                             ChildProcess.productsDirectory + "/wormhole",
                                             "--container", container, "pass", "group.full", "doc"],
                                 environment: fixture.environment, stdin: true)
            }
            try child.write(huge)
            child.closeStdin()
            let result = (status: try child.waitForExit(), err: child.stderr)
            #expect(result.status != 0 && result.err.contains("no space left"), "\(result.err)")
            #expect(try fixture.cliOK(["--container", container, "read", "group.full", "doc"]) == "{\"version\":1}\n")
            let files = try FileManager.default.contentsOfDirectory(atPath: container + "/wormhole/messages")
            #expect(files == ["doc"], "a temporary file was left behind: \(files)")
        }

        @Test("a queue pass on a full disk fails with .diskFull and takes back the space it used: the next pass that fits is appended, and a listener gets every message that passed, none damaged")
        func fullDiskQueue() throws {
            #expect(geteuid() == 0, "this test mounts a small tmpfs: run as root")
            guard geteuid() == 0 else { return }
            let mountPoint = try makeTemporaryDirectory("full-queue")
            defer { try? FileManager.default.removeItem(atPath: mountPoint) }
            #expect(try run("/bin/mount", ["-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", mountPoint]).status == 0)
            defer { _ = try? run("/bin/umount", [mountPoint]) }
            let container = mountPoint + "/group.full"
            let pass = { (json: String) throws -> (status: Int32, err: String) in
                let child = try ChildProcess("wormhole", ["--container", container, "--transiting", "queue", "pass", "group.full", "q"],
                                             environment: self.fixture.environment, stdin: true)
                try child.write(json)
                child.closeStdin()
                return (try child.waitForExit(), child.stderr)
            }
            #expect(try pass("1").status == 0)
            let huge = try pass("\"" + String(repeating: "z", count: 400_000) + "\"")
            #expect(huge.status != 0 && huge.err.contains("no space left"), "\(huge)")
            // What the failed pass wrote is given back, so a message that fits is taken.
            let next = try pass("\"" + String(repeating: "y", count: 150_000) + "\"")
            #expect(next.status == 0, "\(next)")
            let listener = try fixture.cli(["--container", container, "--transiting", "queue", "listen", "--name", "l", "group.full", "q", "--count", "2"], timeout: 20)
            #expect(listener.status == 0 && listener.out.hasPrefix("1\n\"yyy") && listener.err.contains("damaged") == false, "\(listener.status) \(listener.err)")
        }
    }
}

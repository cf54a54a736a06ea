import Foundation
import Testing

/// Examples/: each program built as a newcomer would (a package of its own that depends on this
/// one) and run for what its README paragraph promises; and the README's Swift blocks compiled.
extension BuildSuites {
    @Suite("Examples", .serialized)
    struct ExamplesTests {
        let bus: TestBus
        init() throws { bus = try TestBus() }

        static let root = InstallTests.root
        /// `swift build --package-path Examples`, once, in its own scratch directory.
        static let built: Result<String, TestFailure> = {
            do {
                let scratch = root + "/.build-examples"
                let build = try run("/bin/sh", ["-c", "cd \"$1\" && swift build --package-path Examples --scratch-path \"$2\" 2>&1", "sh", root, scratch],
                                    timeout: 1500)
                guard build.status == 0 else { return .failure(TestFailure("swift build --package-path Examples: \(build.out.suffix(3000))")) }
                let bin = try run("/bin/sh", ["-c", "cd \"$1\" && swift build --package-path Examples --scratch-path \"$2\" --show-bin-path", "sh", root, scratch])
                return .success(bin.out.trimmingCharacters(in: .whitespacesAndNewlines))
            } catch {
                return .failure(TestFailure("swift build --package-path Examples: \(error)"))
            }
        }()

        func program(_ name: String) throws -> String { try ExamplesTests.built.get() + "/" + name }

        @Test("the README's Swift blocks are the readme-* targets, word for word, and compile")
        func readmeSwiftBlocks() throws {
            let readme = try String(contentsOfFile: ExamplesTests.root + "/README.md", encoding: .utf8)
            let blocks = readme.components(separatedBy: "```swift\n").dropFirst().map { $0.components(separatedBy: "```")[0] }
            let targets = ["readme-observe", "readme-tokens", "readme-wormhole"]
            #expect(blocks.count == targets.count, "README has \(blocks.count) Swift blocks")
            for (block, target) in zip(blocks, targets) {
                let source = try String(contentsOfFile: ExamplesTests.root + "/Examples/Sources/\(target)/main.swift", encoding: .utf8)
                #expect(source == block, "README's block differs from Examples/Sources/\(target)/main.swift")
            }
            for target in targets { #expect(FileManager.default.isExecutableFile(atPath: try program(target)), "\(target) did not build") }
        }

        @Test("refresh-on-post: started by the launcher on a post, refreshes once per event, and exits when idle; started again by the next post")
        func refreshOnPost() throws {
            let dir = bus.directory + "/launch.d", cache = bus.directory + "/refresh.cache"
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
            chmod(dir, 0o755)
            // Examples/launch.d's declaration, with this build's program and the test's cache.
            let shipped = try String(contentsOfFile: ExamplesTests.root + "/Examples/launch.d/com.example.refresh.conf", encoding: .utf8)
            let declaration = shipped.replacingOccurrences(of: "/usr/local/bin/refresh-on-post /var/tmp/refresh-on-post.cache",
                                                           with: try program("refresh-on-post") + " " + cache)
                .replacingOccurrences(of: "throttle 2", with: "throttle 0")
            #expect(declaration != shipped)
            try declaration.write(toFile: dir + "/com.example.refresh.conf", atomically: true, encoding: .utf8)
            chmod(dir + "/com.example.refresh.conf", 0o644)
            let launcher = try ChildProcess("darwin-notifyd", ["--user", "--bus", bus.address, "--launch-dir", dir], environment: bus.environment)
            defer { launcher.kill() }
            try launcher.waitForStderr("ready: the launcher")
            func refreshes() -> [String] {
                ((try? String(contentsOfFile: cache, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
            }
            try notifyutilPost(["com.example.refresh"], bus: bus)
            try repeatUntil("the first refresh", action: {}, done: { refreshes().count == 1 })
            #expect(refreshes().first?.hasPrefix("refresh 1: com.example.refresh (1 post, event 1) at ") == true, "\(refreshes())")
            try repeatUntil("the job to exit when idle", action: {}, done: { launcher.stderr.contains("launcher: com.example.refresh ended (exit 0)") })
            try notifyutilPost(["com.example.refresh"], bus: bus)
            try repeatUntil("the second start's refresh", action: {}, done: { refreshes().count == 2 })
            #expect(refreshes().last?.hasPrefix("refresh 1: com.example.refresh (1 post, event 2) at ") == true, "\(refreshes())")
            // Said before the job could run; read from the pipe by another thread, so waited for.
            try repeatUntil("the launcher's two starts", action: {}, done: {
                launcher.stderr.components(separatedBy: "launcher: started com.example.refresh").count == 3
            })
        }

        @Test("settings-broadcast: five changes to a listener suspended with .coalesce arrive as one, the last, on resume")
        func settingsBroadcast() throws {
            let listener = try ChildProcess(try program("settings-broadcast"), ["listen", "5"], environment: bus.environment)
            try listener.waitForLine("listening (suspended)")
            let changer = try run(try program("settings-broadcast"), ["change", "5"], environment: bus.environment)
            #expect(changer.status == 0, "\(changer.err)")
            #expect(try listener.waitForExit(timeout: 60) == 0, "\(listener.stderr)")
            #expect(listener.lines == ["listening (suspended)", "theme=theme-5 size=15", "1 delivered for 5 changes"], "\(listener.lines)")
        }

        @Test("settings-sync: app and helper edit at once; both load all 100 edits, none lost")
        func settingsSync() throws {
            let container = try makeTemporaryDirectory("settings")
            chmod(container, 0o700)
            let app = try ChildProcess(try program("settings-sync"), ["app", container, "50"], environment: bus.environment)
            let helper = try ChildProcess(try program("settings-sync"), ["helper", container, "50"], environment: bus.environment)
            #expect(try app.waitForExit(timeout: 60) == 0, "\(app.stdout) \(app.stderr)")
            #expect(try helper.waitForExit(timeout: 60) == 0, "\(helper.stdout) \(helper.stderr)")
            #expect(app.lines.first?.hasPrefix("app: loaded 100 edits (app=50 helper=50) in ") == true, "\(app.lines)")
            #expect(helper.lines.first?.hasPrefix("helper: loaded 100 edits (app=50 helper=50) in ") == true, "\(helper.lines)")
        }

        @Test("settings-sync fails without the notification: on two buses neither side hears the other, and neither reloads (issue 20 item 9)")
        func settingsSyncNeedsTheNotification() throws {
            let container = try makeTemporaryDirectory("settings-apart")
            chmod(container, 0o700)
            let other = try TestBus()
            let wait = ["SETTINGS_SYNC_WAIT": "3"]
            let app = try ChildProcess(try program("settings-sync"), ["app", container, "20"], environment: bus.environment.merging(wait) { $1 })
            #expect(try app.waitForExit(timeout: 60) == 1, "alone, the app cannot load the helper's edits: \(app.stderr)")
            // The helper runs after the app, on another bus: the app's flag tells it to sync once
            // at start; then nothing more comes, because nobody it can hear posts.
            let helper = try ChildProcess(try program("settings-sync"), ["helper", container, "20"], environment: other.environment.merging(wait) { $1 })
            _ = try helper.waitForExit(timeout: 60)
            #expect(app.lines.first?.hasPrefix("app: loaded 20 edits") == true, "the app never heard the helper: \(app.lines)")
            #expect(app.stdout.contains(" in 0 reloads"), "\(app.stdout)")
            // The helper found the app's flag at start: one reload, which saw the app's 20 edits.
            #expect(helper.lines.first?.hasPrefix("helper: loaded 40 edits") == true && helper.stdout.contains(" in 1 reloads"), "\(helper.stdout)")
        }

        @Test("an example given a container it must refuse says why and exits 1, no crash (issue 20 item 10)")
        func exampleFailsCleanly() throws {
            let container = try makeTemporaryDirectory("refused")
            chmod(container, 0o777) // others could write: refused
            for (target, arguments) in [("share-extension", [container, "1"]), ("app", [container, "1"]), ("settings-sync", ["app", container, "1"])] {
                let result = try run(try program(target), arguments, environment: bus.environment)
                #expect(result.status == 1, "\(target): \(result.status) \(result.err)")
                #expect(result.err.hasPrefix("\(target): ") && result.err.contains("unsafeContainer"), "\(target): \(result.err)")
            }
        }

        @Test("share-extension passes items while the app is not running; the app gets them all, in order; a restart gets only new ones")
        func appAndExtension() throws {
            let container = try makeTemporaryDirectory("share")
            chmod(container, 0o700)
            let passed = try run(try program("share-extension"), [container, "5"], environment: bus.environment)
            #expect(passed.status == 0 && passed.out == "passed 5 items\n", "\(passed)")
            let app = try run(try program("app"), [container, "5"], environment: bus.environment)
            #expect(app.status == 0, "\(app)")
            let items: [String] = (1 ... 5).map { (i: Int) -> String in "\(i): shared item \(i)" }
            let appLines: [String] = app.out.split(separator: "\n").map(String.init)
            #expect(appLines == items, "\(app.out)")
            #expect(try run(try program("share-extension"), [container, "2"], environment: bus.environment).status == 0)
            let again = try run(try program("app"), [container, "2"], environment: bus.environment)
            let againLines: [String] = again.out.split(separator: "\n").map(String.init)
            #expect(againLines == ["1: shared item 1", "2: shared item 2"], "the second batch only: \(again.out)")
        }

        @Test("reentrancy: Darwin handlers run one after another; NotificationCenter's nest")
        func reentrancy() throws {
            let result = try run(try program("reentrancy"), [], environment: bus.environment)
            #expect(result.status == 0, "\(result)")
            let lines = result.out.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            let darwin = Array(lines[1 ..< 21]), foundation = Array(lines[22...])
            #expect(lines[0] == "DarwinNotify:" && lines[21] == "NotificationCenter:", "\(lines)")
            #expect(darwin == (1 ... 10).flatMap { ["begin \($0)", "end \($0)"] }, "\(darwin)")
            #expect(foundation == (1 ... 10).map { "begin \($0)" } + (1 ... 10).reversed().map { "end \($0)" }, "\(foundation)")
        }

        @Test("reload-daemon, built with the plain cc line, reloads its configuration on notify_post")
        func reloadDaemon() throws {
            let dir = try makeTemporaryDirectory("reload")
            let root = ExamplesTests.root
            let cc = try run("/bin/sh", ["-c", """
                cd "$1" && cc -O2 -shared -fPIC -D_GNU_SOURCE -DDARWIN_NOTIFY_VERSION="\\"$(cat VERSION)\\"" Shims/CNotify/*/*.c Shims/CNotify/transport/*/*.c \
                $(pkg-config --cflags --libs dbus-1) -lpthread -o "$2/libCNotify.so" && \
                cc Examples/reload-daemon/reload_daemon.c -I Shims/CNotify/include -L "$2" -lCNotify -Wl,-rpath,"$2" -o "$2/reload_daemon"
                """, "sh", root, dir])
            #expect(cc.status == 0, "\(cc.err)")
            let config = dir + "/example.conf"
            try "level=1\n".write(toFile: config, atomically: true, encoding: .utf8)
            let daemon = try ChildProcess(dir + "/reload_daemon", [config, "1"], environment: bus.environment)
            try daemon.waitForLine("ready")
            #expect(daemon.lines.first == "config: level=1")
            try "level=2\n".write(toFile: config, atomically: true, encoding: .utf8)
            try notifyutilPost(["com.example.reload"], bus: bus)
            try daemon.waitForLine("config: level=2")
            #expect(try daemon.waitForExit() == 0)
        }
    }
}

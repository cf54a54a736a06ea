import Foundation
import Testing

/// A C program written for macOS compiles unchanged against our notify.h and runs on our library.
extension IntegrationSuites {
    @Suite("A plain C program", .serialized)
    struct CProgramTests {
        let bus: TestBus
        init() throws { bus = try TestBus() }

        @Test("compiles with #include <notify.h>, links libCNotify.so, and works")
        func macOSStyleProgram() throws {
            let result = try compileAndRun("Tests/AppleStyle/Sources/macos-style/macos_style.c")
            #expect(result.status == 0, "\(result.err)")
            // <notify_keys.h> compiled, and the Mach-port path failed cleanly into the descriptor one.
            #expect(result.out == "clock: descriptor\nok\n")
        }

        /// Builds one C file of the repository against libCNotify.so as a plain C user does, and runs
        /// it on the test bus. In the sanitizer lane (.ci/sanitize) the library is instrumented: the
        /// program links the sanitizer's runtime too, as any program using that build must.
        func compileAndRun(_ source: String) throws -> (status: Int32, out: String, err: String) {
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
            let products = ChildProcess.productsDirectory
            try #require(FileManager.default.fileExists(atPath: products + "/libCNotify.so"), "build the CNotify product first")
            let out = try makeTemporaryDirectory("cprog") + "/" + URL(fileURLWithPath: source).deletingPathExtension().lastPathComponent
            let sanitizer = ProcessInfo.processInfo.environment["DARWIN_NOTIFY_SANITIZER"].map { ["-fsanitize=" + $0] } ?? []
            let cc = try run("/usr/bin/cc", sanitizer + ["-Wall", "-Werror", root + "/" + source, "-I", root + "/Shims/CNotify/include",
                                                         "-L", products, "-lCNotify", "-Wl,-rpath," + products, "-o", out])
            try #require(cc.status == 0, "cc: \(cc.err)")
            let result = try run(out, [], environment: bus.environment)
            return (result.status, result.out, result.err)
        }

        @Test("a program that closes its notify_register_file_descriptor descriptor and has the name posted lives on: no SIGPIPE from the library's write (Tests/Fixtures/closed_token_fd.c)")
        func closedTokenDescriptor() throws {
            let result = try compileAndRun("Tests/Fixtures/closed_token_fd.c")
            #expect(result.status == 0 && result.out == "alive\n", "status \(result.status) (13: killed by SIGPIPE) \(result.out)\(result.err)")
        }

        @Test("bad input to every notify(3) call gets what Libnotify's notify_client.c answers (Tests/Fixtures/libnotify_statuses.c)")
        func libnotifyStatuses() throws {
            let result = try compileAndRun("Tests/Fixtures/libnotify_statuses.c")
            #expect(result.status == 0 && result.out == "same (0 differences)\n", "\(result.out)\(result.err)")
        }

        @Test("the README's plain cc build of libCNotify.so needs no Swift runtime, and works")
        func plainCCBuild() throws {
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
            let dir = try makeTemporaryDirectory("ccbuild")
            let sources = try FileManager.default.subpathsOfDirectory(atPath: root + "/Shims/CNotify")
                .filter { $0.hasSuffix(".c") && !$0.contains("/tests/") }.sorted().map { root + "/Shims/CNotify/" + $0 }
            let flags = try run("/usr/bin/pkg-config", ["--cflags", "--libs", "dbus-1"]).out
                .split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init)
            let version = try String(contentsOfFile: root + "/VERSION", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            let lib = try run("/usr/bin/cc", ["-O2", "-shared", "-fPIC", "-D_GNU_SOURCE", "-DDARWIN_NOTIFY_VERSION=\"\(version)\""] + sources + flags
                                              + ["-lpthread", "-o", dir + "/libCNotify.so"], timeout: 300) // one cc, some forty files at -O2, beside BuildSuites' compilers
            try #require(lib.status == 0, "cc: \(lib.err)")
            let deps = try run("/usr/bin/ldd", [dir + "/libCNotify.so"])
            #expect(!deps.out.contains("swift"), "links the Swift runtime: \(deps.out)")
            let prog = try run("/usr/bin/cc", ["-Wall", "-Werror", root + "/Tests/AppleStyle/Sources/macos-style/macos_style.c", "-I", root + "/Shims/CNotify/include",
                                               "-L", dir, "-lCNotify", "-Wl,-rpath," + dir, "-o", dir + "/macos_style"])
            try #require(prog.status == 0, "cc: \(prog.err)") // nothing to run otherwise
            let result = try run(dir + "/macos_style", [], environment: bus.environment)
            #expect(result.status == 0, "\(result.err)")
            #expect(result.out == "clock: descriptor\nok\n")
        }
    }
}

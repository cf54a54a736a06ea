import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// C programs the benchmark builds itself with `cc`, as a C user would (no Swift runtime), from
/// the package's sources. Run the benchmark from the package root (`swift run` does).
enum PlainC {
    static func packageRoot() throws -> String {
        let cwd = FileManager.default.currentDirectoryPath
        guard FileManager.default.fileExists(atPath: cwd + "/Shims/CNotify/include/notify.h") else {
            throw BenchError("run notify-bench from the package root (Shims/CNotify not found in \(cwd))")
        }
        return cwd
    }

    /// An observer of `count` names that prints "ready" and idles until stdin closes.
    static let observerSource = """
    #include <darwin_notify.h>
    #include <stdio.h>
    static void cb(CNotify_center *c, void *o, const char *n, const void *a, const void *b) { (void)c; (void)o; (void)n; (void)a; (void)b; }
    int main(int argc, char **argv) {
        CNotify_center *c = CNotify_center_get_darwin_notify_center();
        int count = argc > 2 ? atoi(argv[2]) : 1000;
        char name[600];
        for (int i = 0; i < count; i++) {
            snprintf(name, sizeof name, "%s.%d", argv[1], i);
            if (CNotify_center_add_observer(c, NULL, cb, name) != 0) { fprintf(stderr, "%s\\n", CNotify_last_error()); return 1; }
        }
        printf("ready\\n");
        fflush(stdout);
        char buf[16];
        while (fgets(buf, sizeof buf, stdin)) {}
        return 0;
    }
    """

    /// Where buildLibrary builds (one per run of notify-bench); removed when the run ends.
    static let libraryDirectory = NSTemporaryDirectory() + "notify-bench-cc-\(getpid())"

    /// Removes what buildLibrary built, if anything (main.swift, at the end of a run).
    static func removeLibrary() { try? FileManager.default.removeItem(atPath: libraryDirectory) }

    /// Builds libCNotify.so into a temporary directory (once per run), as the README's cc line
    /// does, and returns the directory.
    static func buildLibrary() throws -> String {
        let root = try packageRoot()
        let dir = libraryDirectory
        if FileManager.default.fileExists(atPath: dir + "/libCNotify.so") { return dir }
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let sources = try FileManager.default.subpathsOfDirectory(atPath: root + "/Shims/CNotify")
            .filter { $0.hasSuffix(".c") && !$0.contains("/tests/") }.sorted().map { root + "/Shims/CNotify/" + $0 } // not the unit tests
        let version = try String(contentsOfFile: root + "/VERSION", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        _ = try Child("/usr/bin/cc", ["-O2", "-shared", "-fPIC", "-D_GNU_SOURCE", "-DDARWIN_NOTIFY_VERSION=\"\(version)\""] + sources
                      + flags("dbus-1") + ["-lpthread", "-o", dir + "/libCNotify.so"]).readToEnd()
        return dir
    }

    /// pkg-config's --cflags --libs for `packages`, as arguments.
    static func flags(_ packages: String...) throws -> [String] {
        try Child("/usr/bin/pkg-config", ["--cflags", "--libs"] + packages).readToEnd()
            .split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init)
    }

    /// Builds peers/peers.c against every peer's C client library and libCNotify; returns it.
    static func buildPeers() throws -> String {
        let root = try packageRoot()
        let dir = try buildLibrary()
        let libraries: [String]
        do { libraries = try flags("dbus-1", "libzmq", "hiredis", "libnats", "libmosquitto", "libsystemd") } catch {
            throw BenchError("a peer's C library is missing: bash .ci/install-deps installs libzmq3-dev libhiredis-dev libnats-dev libmosquitto-dev libsystemd-dev")
        }
        _ = try Child("/usr/bin/cc", ["-O2", root + "/Sources/notify-bench/peers/peers.c", "-I", root + "/Shims/CNotify/include", "-L", dir,
                                      "-lCNotify", "-Wl,-rpath," + dir] + libraries + ["-lpthread", "-o", dir + "/peers"]).readToEnd()
        return dir + "/peers"
    }

    /// Builds notifyutil as the Debian package does: the Makefile's C front door (`make
    /// build/notifyutil`, the core inside, glibc and libdbus shared) with dpkg-buildflags'
    /// hardening. SwiftPM's notifyutil is not the one that ships: SwiftPM links every executable
    /// with the Swift runtime's image registration, which loads libswiftCore.so. Returns its path.
    static func buildNotifyutil() throws -> String {
        let root = try packageRoot()
        let dir = NSTemporaryDirectory() + "notify-bench-notifyutil-\(getpid())"
        let built = dir + "/notifyutil"
        if FileManager.default.fileExists(atPath: built) { return built }
        _ = try Child("/usr/bin/make", ["-s", "-C", root, "BUILD=" + dir, built,
                                        "CFLAGS=-O2 -g -fstack-protector-strong -D_FORTIFY_SOURCE=2 -fcf-protection"]).readToEnd()
        return built
    }

    /// Builds libCNotify.so and the observer into a temporary directory; returns the observer.
    static func buildObserver() throws -> String {
        let root = try packageRoot()
        let dir = try buildLibrary()
        try (observerSource.replacingOccurrences(of: "#include <stdio.h>", with: "#include <stdio.h>\n#include <stdlib.h>"))
            .write(toFile: dir + "/observer.c", atomically: true, encoding: .utf8)
        _ = try Child("/usr/bin/cc", ["-O2", dir + "/observer.c", "-I", root + "/Shims/CNotify/include", "-L", dir, "-lCNotify",
                                      "-Wl,-rpath," + dir, "-o", dir + "/observer"]).readToEnd()
        return dir + "/observer"
    }
}

/// Wall time of one run of a command, spawned with posix_spawn (no Foundation overhead), in ms.
func timeCommand(_ path: String, _ arguments: [String], environment: [String: String]) throws -> Double {
    var env = ProcessInfo.processInfo.environment
    env.merge(environment) { $1 }
    let argv = ([path] + arguments).map { strdup($0) } + [nil]
    let envp = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { argv.forEach { free($0) }; envp.forEach { free($0) } }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    defer { posix_spawn_file_actions_destroy(&actions) }
    let start = DispatchTime.now().uptimeNanoseconds
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, path, &actions, nil, argv, envp)
    guard rc == 0 else { throw BenchError("cannot run \(path): \(String(cString: strerror(rc)))") }
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
    guard status == 0 else { throw BenchError("\(path) \(arguments) exited with status \(status)") }
    return elapsed
}

// swift-tools-version: 6.0
import Foundation
import PackageDescription

// One version for everything (the library, the CLIs, darwin-notify.pc, the man pages, the Debian
// package): the VERSION file. SwiftPM builds take it from Shims/CNotify/base/version_number.h, not
// from here: SwiftPM caches this manifest's result by its text, so a number read here went stale
// after a bump of VERSION alone (the Makefile checks that the two agree).

// notifyutil-full (the Swift notifyutil behind its C front door) and distnotify carry the Swift
// runtime inside (below); sanitizer builds (`swift build --sanitize=address|thread|undefined`) set
// DARWIN_NOTIFY_DYNAMIC_NOTIFYUTIL=1 (.ci/sanitize does this), which links them like every other
// executable, the runtime shared.
let staticStdlibNotifyutil = Context.environment["DARWIN_NOTIFY_DYNAMIC_NOTIFYUTIL"] == nil

let package = Package(
    name: "DarwinNotify",
    products: [
        .library(name: "DarwinNotify", targets: ["DarwinNotify"]),
        // Apple's Swift module for <notify.h>: `import notify`, with Dispatch and Apple's Swift
        // signature of notify_register_dispatch (a DispatchQueue).
        .library(name: "notify", targets: ["notify"]),
        // The C core as a shared library, so plain C programs can `#include <notify.h>` and link it.
        .library(name: "CNotify", type: .dynamic, targets: ["CNotify"]),
        .executable(name: "notifyutil", targets: ["notifyutil"]),
        .executable(name: "darwin-notifyd", targets: ["darwin-notifyd"]),
        .executable(name: "notifyutil-full", targets: ["notifyutil-full"]),
        .executable(name: "notify-bench", targets: ["notify-bench"]),
        .library(name: "Wormhole", targets: ["Wormhole"]),
        // MMWormhole's class and names over Wormhole: `import MMWormhole`, NSCoding messages.
        .library(name: "MMWormhole", targets: ["MMWormhole"]),
        // Darwin notifications into Foundation's NotificationCenter and back (a module of its own:
        // the core never depends on Foundation).
        .library(name: "DarwinNotifyFoundation", targets: ["DarwinNotifyFoundation"]),
        .executable(name: "wormhole", targets: ["wormhole"]),
        // One local bus ↔ an MQTT broker (docs/BRIDGE.md).
        .executable(name: "notify-bridge", targets: ["notify-bridge"]),
        .executable(name: "distnotify", targets: ["distnotify"]),
    ],
    dependencies: [
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        // `swift package generate-documentation`: the DocC catalogs of DarwinNotify and Wormhole.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CDBus",
            path: "Shims/CDBus",
            pkgConfig: "dbus-1",
            providers: [.apt(["libdbus-1-dev"])]
        ),
        .target(
            name: "CNotify",
            dependencies: ["CDBus"],
            path: "Shims/CNotify",
            // The unit tests beside the modules (.ci/unit builds and runs them) are not the library's.
            exclude: ["base/tests", "center/tests", "loop/tests", "transport/bus/tests", "transport/fast/tests"],
            publicHeadersPath: "include",
            cSettings: [.define("_GNU_SOURCE")],
            // Not libdispatch: notify_register_dispatch finds it at run time (dispatch_api.c).
            linkerSettings: [.linkedLibrary("dbus-1"), .linkedLibrary("pthread")]
        ),
        .target(name: "DarwinNotify", dependencies: ["CNotify"]),
        .target(name: "notify", dependencies: ["DarwinNotify", "CNotify"]),
        // libmosquitto, the MQTT client notify-bridge uses (Debian: libmosquitto-dev).
        .systemLibrary(
            name: "CMosquitto",
            path: "Shims/CMosquitto",
            pkgConfig: "libmosquitto",
            providers: [.apt(["libmosquitto-dev"])]
        ),
        // The bridge and the wormhole tool use FoundationEssentials, not Foundation: Foundation's
        // ICU data alone made each binary 60 MB stripped (issue 25).
        .target(name: "NotifyBridge", dependencies: ["DarwinNotify", "CNotify", "CDBus", "CMosquitto", "Wormhole",
                                                     .product(name: "SystemPackage", package: "swift-system")]),
        .executableTarget(
            name: "notify-bridge",
            dependencies: ["NotifyBridge", "DarwinNotify", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        // What the command-line tools share to print (unbuffered stdout and stderr, JSON strings):
        // theirs, not the library's.
        .target(name: "CommandLineSupport"),
        .target(name: "NotifyUtilCore", dependencies: ["DarwinNotify", "CNotify", "CDBus", "CommandLineSupport"]),
        // Distributed notifications from the shell: no Foundation (it ships beside notifyutil), the
        // Swift runtime inside as notifyutil-full has it.
        .executableTarget(
            name: "distnotify",
            dependencies: ["DarwinNotify", "CNotify", "CommandLineSupport"],
            linkerSettings: staticStdlibNotifyutil ? [.unsafeFlags(["-static-stdlib"])] : []
        ),
        .target(name: "DarwinNotifyFoundation", dependencies: ["DarwinNotify", "CNotify"]),
        // notifyutil is a C front door (Sources/notifyutil/main.c): it runs the command lines that
        // only post and execs notifyutil-full for everything else. A command-line post is mostly
        // process start-up, and no Swift main with glibc shared starts as fast as dbus-send
        // (BENCHMARKS.md, "cli"). SwiftPM links every executable with the Swift runtime's image
        // registration, so the notifyutil that ships is built by the Makefile with cc alone (and
        // libdbus inside: libdbus-inside/no_systemd_sockets.c says why).
        .executableTarget(name: "notifyutil", dependencies: ["CNotify", "CDBus"], exclude: ["libdbus-inside"]),
        // The full notifyutil carries the Swift runtime inside (-static-stdlib): loading the
        // runtime's shared libraries took 2 ms; glibc stays shared (its user and host look-ups
        // in a static executable need the very glibc it was built with).
        .executableTarget(
            name: "notifyutil-full",
            dependencies: ["NotifyUtilCore", "CommandLineSupport"],
            linkerSettings: staticStdlibNotifyutil ? [.unsafeFlags(["-static-stdlib"])] : []
        ),
        .target(name: "Wormhole", dependencies: ["DarwinNotify", .product(name: "SystemPackage", package: "swift-system")]),
        .target(name: "MMWormhole", dependencies: ["Wormhole", "DarwinNotify", "DarwinNotifyFoundation"]),
        .executableTarget(
            name: "wormhole",
            dependencies: ["Wormhole", "DarwinNotify", .product(name: "ArgumentParser", package: "swift-argument-parser"),
                           .product(name: "SystemPackage", package: "swift-system")]
        ),
        // C programs used by the integration tests and the benchmark: a CNotify client, and the
        // raw-libdbus floor that the benchmark compares against (no wrapper at all).
        .executableTarget(
            name: "cnotify-probe",
            dependencies: ["CNotify"],
            // Its `dispatch` role calls notify_register_dispatch, so it links what such a C user links.
            linkerSettings: [.linkedLibrary("dispatch"), .linkedLibrary("BlocksRuntime")]
        ),
        .executableTarget(name: "dbus-floor", dependencies: ["CDBus"]),
        // darwin-notifyd(8): notifyd's part that Linux lacks (notify.conf's monitor and set lines, the
        // system's names from the kernel's event sources); C over the core, one file per source.
        .executableTarget(name: "darwin-notifyd", dependencies: ["CNotify"], cSettings: [.define("_GNU_SOURCE")]),
        .executableTarget(name: "wormhole-probe", dependencies: ["Wormhole"]),
        // The Swift readers of what others write, for libFuzzer (.ci/fuzz); elsewhere a replayer of files.
        .executableTarget(name: "swift-fuzz", dependencies: ["Wormhole", "NotifyBridge", "CommandLineSupport"], path: "Tests/Fuzz/swift"),
        .executableTarget(
            name: "notify-bench",
            // The probes and the floor are run as child processes; depending on them makes
            // `swift run notify-bench` build them too.
            dependencies: ["DarwinNotify", "DarwinNotifyFoundation", "Wormhole", "cnotify-probe", "dbus-floor", "notifyutil", "notifyutil-full", "darwin-notifyd",
                           "wormhole-probe", "notify-bridge", .product(name: "Histogram", package: "hdrhistogram-swift")],
            // peers/peers.c is built by the benchmark itself with cc, against the peers' C libraries;
            // cli-floor/ by its run.sh (start-up floors for `cli`).
            exclude: ["peers", "cli-floor"]
        ),
        .testTarget(name: "DarwinNotifyTests", dependencies: ["DarwinNotify", "CNotify", "NotifyUtilCore", "Wormhole", "NotifyBridge",
                                                              "MMWormhole", "DarwinNotifyFoundation"]),
        .testTarget(
            name: "IntegrationTests",
            // Not notifyutil or distnotify: their static-link flag would reach this bundle's link. The tests run the
            // binary that `swift build` (README) makes.
            dependencies: ["DarwinNotify", "CNotify", "Wormhole", "DarwinNotifyFoundation", "cnotify-probe", "wormhole", "wormhole-probe", "notify-bridge"]
        ),
    ]
)

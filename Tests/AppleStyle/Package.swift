// swift-tools-version: 6.0
// Tests/AppleStyle: code as it is written for Apple platforms, built on Linux with no change to
// its source files but the one documented import under `#if os(Linux)` (docs: "Porting from Apple
// platforms"). Each pattern is in Apple's own spelling, from Apple's documentation:
//
// - DarwinNotificationCenter: a Swift wrapper of the CF Darwin notify center (the most common
//   wrapper on GitHub), with its own XCTest suite (Tests/DarwinNotificationCenterTests);
// - darwin-tool: a command-line program over that wrapper, the other process of its tests;
// - notify-dispatch: `import notify` and notify_register_dispatch with a DispatchQueue;
// - distributed-pair: DistributedNotificationCenter, observed on the main thread, userInfo
//   numbers cast as macOS code casts them;
// - wormhole-pair: MMWormhole with an NSCoding class as the message (hostile-pass, the attacker,
//   writes archives it must refuse);
// - macos-style: a C program with <notify.h>, <notify_keys.h> and a Mach-port path.
//
// CI: `bash .ci/apple-style` builds it and runs its tests on a private bus.
import PackageDescription

let package = Package(
    name: "AppleStyle",
    dependencies: [
        // By name: a path dependency's identity is its directory's name, which differs by checkout.
        .package(name: "DarwinNotify", path: "../.."),
    ],
    targets: [
        // Only the dependency is Linux's: the sources import what they import on macOS, plus the
        // documented line under #if os(Linux).
        .target(name: "DarwinNotificationCenter", dependencies: [
            .product(name: "DarwinNotifyFoundation", package: "DarwinNotify", condition: .when(platforms: [.linux])),
        ]),
        .executableTarget(name: "darwin-tool", dependencies: ["DarwinNotificationCenter"]),
        .executableTarget(name: "notify-dispatch", dependencies: [
            .product(name: "notify", package: "DarwinNotify", condition: .when(platforms: [.linux])),
        ]),
        .executableTarget(name: "distributed-pair", dependencies: [
            .product(name: "DarwinNotifyFoundation", package: "DarwinNotify", condition: .when(platforms: [.linux])),
        ]),
        .executableTarget(name: "wormhole-pair", dependencies: [.product(name: "MMWormhole", package: "DarwinNotify")]),
        // Not Apple-style: the attacker of the wormhole-pair test, through the Wormhole module.
        .executableTarget(name: "hostile-pass", dependencies: [.product(name: "Wormhole", package: "DarwinNotify")]),
        .executableTarget(name: "macos-style", dependencies: [.product(name: "CNotify", package: "DarwinNotify")]),
        .testTarget(name: "DarwinNotificationCenterTests", dependencies: [
            "DarwinNotificationCenter",
            .product(name: "DarwinNotifyFoundation", package: "DarwinNotify", condition: .when(platforms: [.linux])),
        ]),
    ],
    // The language mode such code is written in (a `shared` singleton of a non-Sendable class,
    // globals touched from callbacks): the same sources are errors under Swift 6's checks on
    // macOS too.
    swiftLanguageModes: [.v5]
)

// swift-tools-version: 6.0
// Examples/: small, real programs that use DarwinNotify as a newcomer would, from a package of
// their own that depends on this repository (`swift build --package-path Examples`). The README's
// Swift blocks are compiled here too (readme-*), so they cannot rot. Tests/IntegrationTests/
// ExamplesTests.swift builds and runs them all.
import PackageDescription

let package = Package(
    name: "DarwinNotifyExamples",
    dependencies: [
        // By name: a path dependency's identity is its directory's name, which differs by checkout.
        .package(name: "DarwinNotify", path: ".."),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    ],
    targets: [
        // 1. Settings sync between an app and its helper: one SQLite database in the group
        //    container, a coordinated `needSyncDatabase` flag, a Darwin notification to reload.
        .executableTarget(name: "settings-sync", dependencies: [
            .product(name: "DarwinNotify", package: "DarwinNotify"), .product(name: "Wormhole", package: "DarwinNotify"),
            .product(name: "GRDB", package: "GRDB.swift"),
        ]),
        // 2. App ↔ extension messages (MMWormhole's use case) through a queue wormhole.
        .executableTarget(name: "share-extension", dependencies: [.product(name: "Wormhole", package: "DarwinNotify")]),
        .executableTarget(name: "app", dependencies: [.product(name: "Wormhole", package: "DarwinNotify")]),
        // 3. Re-entrancy and ordering: Darwin notifications against Foundation's NotificationCenter.
        .executableTarget(name: "reentrancy", dependencies: [.product(name: "DarwinNotify", package: "DarwinNotify")]),
        // 4. A settings change with its details to every interested process (distributed
        //    notifications, userInfo), to a listener that coalesces while suspended.
        .executableTarget(name: "settings-broadcast", dependencies: [
            .product(name: "DarwinNotifyFoundation", package: "DarwinNotify"),
        ]),
        // The README's Swift blocks, compiled as written (not run: they wait for notifications).
        .executableTarget(name: "refresh-on-post", dependencies: [.product(name: "DarwinNotify", package: "DarwinNotify")]),
        .executableTarget(name: "readme-observe", dependencies: [.product(name: "DarwinNotify", package: "DarwinNotify")]),
        .executableTarget(name: "readme-tokens", dependencies: [.product(name: "DarwinNotify", package: "DarwinNotify")]),
        .executableTarget(name: "readme-wormhole", dependencies: [.product(name: "Wormhole", package: "DarwinNotify")]),
    ]
)

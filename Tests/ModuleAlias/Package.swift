// swift-tools-version: 6.0
// Tests/ModuleAlias: a package that ships its own C shim module named `DarwinNotify` (as some
// Apple-platform packages do, around <notify.h>) and depends on this repository. Two targets
// named DarwinNotify in one build are an error ("multiple packages declare targets with a
// conflicting name"); SwiftPM's moduleAliases renames ours for this package, and the recipe in
// docs (Porting from Apple platforms, "Module names") is this file. CI builds and runs it.
import PackageDescription

let package = Package(
    name: "ModuleAliasCheck",
    dependencies: [.package(path: "DarwinNotify")],
    targets: [
        // The third party's own shim, named as ours is.
        .target(name: "DarwinNotify", path: "Sources/DarwinNotify"),
        .executableTarget(
            name: "alias-check",
            dependencies: [
                "DarwinNotify",
                // Ours, under another name in this package: `import DarwinNotifyLinux` reaches it.
                .product(name: "DarwinNotify", package: "DarwinNotify", moduleAliases: ["DarwinNotify": "DarwinNotifyLinux"]),
                .product(name: "notify", package: "DarwinNotify", moduleAliases: ["DarwinNotify": "DarwinNotifyLinux"]),
            ]
        ),
    ]
)

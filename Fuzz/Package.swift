// swift-tools-version: 6.2
import PackageDescription

// libFuzzer targets for every decoder of stored or outside input (`make fuzz`, Scripts/fuzz.sh).
// Each target is an executable of one file whose `@main` starts libFuzzer's driver (FuzzSupport)
// with a function that checks one input. The fuzzer's flags are given on the command line,
// never here:
//
//     swift build -c release --package-path Fuzz -Xswiftc -sanitize=fuzzer,address \
//         -Xswiftc -enable-testing -Xswiftc -use-ld=lld
//
// The targets reach the decoders with `@testable import` (hence -enable-testing), so no decoder
// is made public for them. `make fuzz` (Scripts/fuzz.sh) builds and runs them.
let package = Package(
    name: "Fuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: "../Packages/QueueCore"),
        .package(path: "../Packages/QueuePersistence"),
        .package(path: "../Packages/QueueRetry"),
        .package(path: "../Packages/TaskBroker"),
        // The SQLite-only tool (no trait): built with the fuzzer's flags in release, SwiftNIO,
        // swift-crypto and postgres-nio (trait `Postgres`) cost ~10 minutes of every `make fuzz` on
        // 2 cores, and Hummingbird (trait `Console`) minutes more. A `postgres://` location is then
        // refused with its typed error, which the fuzzer still reaches.
        .package(path: "../Integration", traits: []),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
    ],
    targets: [
        // Starts libFuzzer's driver from a target's `@main`.
        .target(name: "FuzzSupport"),
        // FileBasedPersister's job files: the JSON of a job, and a job file's name.
        .executableTarget(
            name: "FileJobFuzzer",
            dependencies: [
                "FuzzSupport",
                .product(name: "QueuePersistence", package: "QueuePersistence"),
                .product(name: "QueueCoreTesting", package: "QueueCore"),
            ]
        ),
        // SQLiteJobPersister's rows: the binary format of BinaryJobCoder.
        .executableTarget(
            name: "BinaryRowFuzzer",
            dependencies: [
                "FuzzSupport",
                .product(name: "QueuePersistence", package: "QueuePersistence"),
                .product(name: "QueueCoreTesting", package: "QueueCore"),
            ]
        ),
        // TaskBroker's SQLite rows (any SQLite value in any column) and stored payloads.
        .executableTarget(
            name: "TaskRowFuzzer",
            dependencies: [
                "FuzzSupport",
                .product(name: "TaskBroker", package: "TaskBroker"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // The `queuekit` command line: its argument parsing and the `--database` location.
        .executableTarget(
            name: "QueuekitArgumentsFuzzer",
            dependencies: [
                "FuzzSupport",
                .product(name: "QueuekitCLI", package: "Integration"),
                .product(name: "QueueRetry", package: "QueueRetry"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// The same settings as every QueueKit package.
for target in package.targets where target.type != .test {
    var settings = target.swiftSettings ?? []
    // SE-0335: `any` for existential types.
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    // SE-0444: a file sees only the members of modules it imports.
    settings.append(.enableUpcomingFeature("MemberImportVisibility"))
    // SE-0409: imports are internal unless marked `public import`.
    settings.append(.enableUpcomingFeature("InternalImportsByDefault"))
    // Zero warnings, and public types say whether they are Sendable.
    settings.append(.treatAllWarnings(as: .error))
    settings.append(.treatWarning("ExplicitSendable", as: .error))
    target.swiftSettings = settings
}

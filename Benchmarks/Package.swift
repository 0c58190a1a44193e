// swift-tools-version: 6.2
import PackageDescription

// Lint's compile check of the benchmarks (`make lint`): one root package whose executable
// targets are the packages' own benchmark folders (symlinks under Sources/), so that the peers
// they measure against (SwiftNIO, postgres-nio, GRDB) are built once instead of once per
// benchmark package. `make bench` still runs each package's own Benchmarks/ package; the
// dependencies below are theirs, and `make lint` fails if a benchmark folder has no symlink
// here or a target's dependencies differ from its package's manifest.
let package = Package(
    name: "Benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: "../Packages/AsyncPrimitives"),
        .package(path: "../Packages/JobChain"),
        .package(path: "../Packages/QueueCore"),
        .package(path: "../Packages/QueuePersistence"),
        .package(path: "../Packages/TaskBroker"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
    ],
    targets: [
        .executableTarget(
            name: "AsyncPrimitivesBenchmarks",
            dependencies: [
                .product(name: "AsyncPrimitives", package: "AsyncPrimitives"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .executableTarget(
            name: "JobChainBenchmarks",
            dependencies: [
                .product(name: "JobChain", package: "JobChain"),
            ]
        ),
        .executableTarget(
            name: "QueueCoreBenchmarks",
            dependencies: [
                .product(name: "QueueCore", package: "QueueCore"),
                .product(name: "DequeModule", package: "swift-collections"),
            ]
        ),
        .executableTarget(
            name: "QueuePersistenceBenchmarks",
            dependencies: [
                .product(name: "QueuePersistence", package: "QueuePersistence"),
                .product(name: "QueueCore", package: "QueueCore"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .executableTarget(
            name: "TaskBrokerBenchmarks",
            dependencies: [
                .product(name: "TaskBroker", package: "TaskBroker"),
                .product(name: "TaskBrokerPostgres", package: "TaskBroker"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
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
    // Zero warnings (SE-0480 warning control, applied to our own targets only), and
    // public types say whether they are Sendable.
    settings.append(.treatAllWarnings(as: .error))
    settings.append(.treatWarning("ExplicitSendable", as: .error))
    target.swiftSettings = settings
}

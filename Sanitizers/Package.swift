// swift-tools-version: 6.2
import PackageDescription

// The sanitizer runs (`make test-tsan`, `make test-asan`): one root package whose test targets
// are the packages' own test folders (symlinks under Tests/), so that every dependency is built
// once per sanitizer instead of once per package. The test helpers that the crash and CLI tests
// start as processes (found by name next to the test bundle) are symlinked under Sources/ too,
// so they are built with the same sanitizer. Nothing here is a product: the packages stay
// the single source of every file.
let package = Package(
    name: "Sanitizers",
    platforms: [.macOS(.v15)],
    // The PostgreSQL parts: QueuekitCLI's sources compile them under this trait (Integration's
    // own), TaskBroker's tests and crash helper when TaskBrokerPostgres can be imported. The
    // AddressSanitizer run builds without it (`--disable-default-traits`): no SwiftNIO.
    traits: [
        .trait(name: "Postgres", description: "queuekit on a PostgreSQL database besides SQLite."),
        .default(enabledTraits: ["Postgres"]),
    ],
    dependencies: [
        .package(path: "../Packages/AsyncPrimitives"),
        .package(path: "../Packages/QueueCore"),
        .package(path: "../Packages/QueueRetry"),
        .package(path: "../Packages/QueuePersistence"),
        .package(path: "../Packages/JobChain"),
        .package(path: "../Packages/TaskBroker"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.1.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
    ],
    targets: [
        // The processes that the tests start (Sources/ holds symlinks to the packages' own folders).
        .executableTarget(
            name: "QueuePersistenceCrashHelper",
            dependencies: [
                .product(name: "QueuePersistence", package: "QueuePersistence"),
                .product(name: "QueueCore", package: "QueueCore"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .executableTarget(
            name: "TaskBrokerCrashHelper",
            dependencies: [
                .product(name: "TaskBroker", package: "TaskBroker"),
                .product(name: "TaskBrokerPostgres", package: "TaskBroker", condition: .when(traits: ["Postgres"])),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(name: "queuekit", dependencies: ["QueuekitCLI"]),
        .target(
            name: "QueuekitCLI",
            dependencies: [
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ObjectDataSource", package: "AsyncPrimitives"),
                .product(name: "QueueRetry", package: "QueueRetry"),
                .product(name: "TaskBroker", package: "TaskBroker"),
                .product(name: "TaskBrokerPostgres", package: "TaskBroker", condition: .when(traits: ["Postgres"])),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["Postgres"])),
            ]
        ),
        // Each package's tests, with the dependencies its own manifest gives them.
        .testTarget(
            name: "AsyncPrimitivesTests",
            dependencies: [
                .product(name: "AsyncPrimitives", package: "AsyncPrimitives"),
                .product(name: "AsyncPrimitivesTesting", package: "AsyncPrimitives"),
                .product(name: "ObjectDataSource", package: "AsyncPrimitives"),
            ]
        ),
        .testTarget(
            name: "QueueCoreTests",
            dependencies: [
                .product(name: "QueueCore", package: "QueueCore"),
                .product(name: "QueueCoreTesting", package: "QueueCore"),
                .product(name: "AsyncPrimitivesTesting", package: "AsyncPrimitives"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ]
        ),
        .testTarget(
            name: "JobChainTests",
            dependencies: [
                .product(name: "JobChain", package: "JobChain"),
                .product(name: "AsyncPrimitivesTesting", package: "AsyncPrimitives"),
            ]
        ),
        .testTarget(
            name: "QueuePersistenceTests",
            dependencies: [
                "QueuePersistenceCrashHelper",
                .product(name: "QueuePersistence", package: "QueuePersistence"),
                .product(name: "QueuePersistenceTesting", package: "QueuePersistence"),
                .product(name: "QueueCore", package: "QueueCore"),
                .product(name: "QueueCoreTesting", package: "QueueCore"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncPrimitivesTesting", package: "AsyncPrimitives"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]
        ),
        .testTarget(
            name: "TaskBrokerTests",
            dependencies: [
                "TaskBrokerCrashHelper",
                .product(name: "TaskBroker", package: "TaskBroker"),
                .product(name: "TaskBrokerPostgres", package: "TaskBroker", condition: .when(traits: ["Postgres"])),
                .product(name: "TaskBrokerTesting", package: "TaskBroker"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["Postgres"])),
                .product(name: "QueueRetry", package: "QueueRetry"),
                .product(name: "AsyncPrimitivesTesting", package: "AsyncPrimitives"),
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "queuekit",
                "QueuekitCLI",
                .product(name: "AsyncPrimitives", package: "AsyncPrimitives"),
                .product(name: "AsyncPrimitivesTesting", package: "AsyncPrimitives"),
                .product(name: "QueueCore", package: "QueueCore"),
                .product(name: "QueueRetry", package: "QueueRetry"),
                .product(name: "QueuePersistence", package: "QueuePersistence"),
                .product(name: "JobChain", package: "JobChain"),
                .product(name: "TaskBroker", package: "TaskBroker"),
                .product(name: "ObjectDataSource", package: "AsyncPrimitives"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// The same settings as every QueueKit package, for the helper executables (our code).
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

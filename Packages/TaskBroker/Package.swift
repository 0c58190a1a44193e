// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "TaskBroker",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        // The whole library with its embedded default: the engine (TaskBrokerCore) and the SQLite
        // backend (TaskBrokerSQLite), both brought by `import TaskBroker`.
        .library(name: "TaskBroker", targets: ["TaskBroker"]),
        // The engine and its API without a backend: with TaskBrokerPostgres, a program that never
        // compiles GRDB.
        .library(name: "TaskBrokerCore", targets: ["TaskBrokerCore"]),
        .library(name: "TaskBrokerTesting", targets: ["TaskBrokerTesting"]),
        // The PostgreSQL backend: its own product, so that a user of the SQLite broker never
        // compiles postgres-nio.
        .library(name: "TaskBrokerPostgres", targets: ["TaskBrokerPostgres"]),
    ],
    dependencies: [
        // `make docs` (swift-docc-plugin): a command plugin, linked into no target.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        .package(path: "../AsyncPrimitives"),
        .package(path: "../QueueRetry"),
        .package(path: "../QueuePersistence"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        // Spans around save, claim, handle and outcome, with the trace context stored with each action.
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.1.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.0"),
        // NIOCore (ByteBuffer binds) and NIOSSL (TLS settings): postgres-nio builds both anyway.
        .package(url: "https://github.com/apple/swift-nio", from: "2.81.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.25.0"),
        // Property-based tests (random inputs with a replayable seed); the tests' only.
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
    ],
    targets: [
        // `import TaskBroker`: re-exports the engine and the SQLite backend (Sources/TaskBroker
        // holds only the re-export and the documentation catalog).
        .target(
            name: "TaskBroker",
            dependencies: ["TaskBrokerCore", "TaskBrokerSQLite"]
        ),
        // The engine, the public API and the storage seam (`TaskStorage` and the capability
        // protocols a backend may add); it names no backend.
        .target(
            name: "TaskBrokerCore",
            // QueueRetry: `Backoff` for timed retries (TaskContext.retry(with:)).
            dependencies: [
                // AsyncPrimitives: `Duration.clamping(seconds:)`, the clamping every package shares.
                .product(name: "AsyncPrimitives", package: "AsyncPrimitives"),
                .product(name: "QueueRetry", package: "QueueRetry"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Instrumentation", package: "swift-distributed-tracing"),
            ]
        ),
        // The embedded backend: one SQLite file through GRDB, with QueuePersistence's `SQLiteStore`
        // plumbing (WAL, migrations, clear errors for corrupt and newer files).
        .target(
            name: "TaskBrokerSQLite",
            dependencies: [
                "TaskBrokerCore",
                .product(name: "QueuePersistence", package: "QueuePersistence"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "TaskBrokerPostgres",
            dependencies: [
                "TaskBrokerCore",
                // AsyncPrimitives: `Deferred`, the one-shot a held batch's task and the broker meet on.
                .product(name: "AsyncPrimitives", package: "AsyncPrimitives"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "TaskBrokerTesting",
            dependencies: ["TaskBrokerCore"]
        ),
        // Another process for the tests: a worker that the crash test kills with SIGKILL at random
        // moments, a worker that serves saves made by the test process, and a process that holds
        // SQLite's write lock.
        .executableTarget(
            name: "TaskBrokerCrashHelper",
            dependencies: [
                "TaskBroker", "TaskBrokerPostgres", .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "TaskBrokerTests",
            dependencies: [
                "TaskBroker",
                "TaskBrokerCore",
                "TaskBrokerSQLite",
                "TaskBrokerPostgres",
                "TaskBrokerTesting",
                "TaskBrokerCrashHelper",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "QueueRetry", package: "QueueRetry"),
                .product(name: "AsyncPrimitivesTesting", package: "AsyncPrimitives"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// The same settings for every QueueKit package. Library targets are strict; test targets
// keep the defaults of the Swift 6 language mode so that test code written against the
// seeds' documented API (`Error?` in a completion, say) compiles, and `make test-all`
// fails on any warning they print instead.
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

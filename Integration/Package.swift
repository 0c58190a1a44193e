// swift-tools-version: 6.2
import PackageDescription

// The packages' benchmarks, compiled here (`make lint`, and every `swift test` of this package) so
// that the peers they measure against (SwiftNIO, postgres-nio, GRDB) are built once, in this
// graph, and not again in a package of their own. Each target's folder is a symlink to the
// package's own `Benchmarks/Sources/<X>Benchmarks`, and its dependencies are those of that
// package's `Benchmarks/Package.swift`, which `make bench` builds and runs in release mode; `make
// lint` fails if a benchmark folder has no symlink here or its dependencies differ.
let benchmarks: [Target] = [
    .executableTarget(
        name: "AsyncPrimitivesBenchmarks",
        dependencies: [
            .product(name: "AsyncPrimitives", package: "AsyncPrimitives"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
        ],
        path: "Benchmarks/AsyncPrimitivesBenchmarks"
    ),
    // AsyncPrimitives' callgrind driver (one side of a row at a time), from the same manifest.
    .executableTarget(
        name: "AsyncPrimitivesProfile",
        dependencies: [
            .product(name: "AsyncPrimitives", package: "AsyncPrimitives"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
        ],
        path: "Benchmarks/AsyncPrimitivesProfile"
    ),
    .executableTarget(
        name: "JobChainBenchmarks",
        dependencies: [
            .product(name: "JobChain", package: "JobChain"),
        ],
        path: "Benchmarks/JobChainBenchmarks"
    ),
    .executableTarget(
        name: "QueueCoreBenchmarks",
        dependencies: [
            .product(name: "QueueCore", package: "QueueCore"),
            .product(name: "DequeModule", package: "swift-collections"),
        ],
        path: "Benchmarks/QueueCoreBenchmarks"
    ),
    .executableTarget(
        name: "QueuePersistenceBenchmarks",
        dependencies: [
            .product(name: "QueuePersistence", package: "QueuePersistence"),
            .product(name: "QueueCore", package: "QueueCore"),
            .product(name: "GRDB", package: "GRDB.swift"),
        ],
        path: "Benchmarks/QueuePersistenceBenchmarks"
    ),
    .executableTarget(
        name: "TaskBrokerBenchmarks",
        dependencies: [
            .product(name: "TaskBroker", package: "TaskBroker"),
            .product(name: "TaskBrokerPostgres", package: "TaskBroker"),
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "PostgresNIO", package: "postgres-nio"),
            .product(name: "Logging", package: "swift-log"),
        ],
        path: "Benchmarks/TaskBrokerBenchmarks"
    ),
]

let package = Package(
    name: "Integration",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .executable(name: "queuekit", targets: ["queuekit"]),
        // The tool's commands and argument parsing, for the fuzz targets (`Fuzz/`).
        .library(name: "QueuekitCLI", targets: ["QueuekitCLI"]),
    ],
    // `--database postgres://…` (and `demo-cluster`) are compiled in with the trait `Postgres`, on by
    // default. `make demo` builds the tool without it (`--disable-default-traits`): the embedded
    // SQLite demo then compiles no SwiftNIO, swift-crypto or postgres-nio.
    // `queuekit serve` (TaskBroker's web console, on Hummingbird) is compiled in with the trait
    // `Console`, also on by default and also left out of `make demo`'s build.
    traits: [
        .trait(name: "Postgres", description: "queuekit on a PostgreSQL database (postgres-nio) besides SQLite."),
        .trait(name: "Console", description: "`queuekit serve`: TaskBroker's web console (Hummingbird)."),
        .default(enabledTraits: ["Postgres", "Console"]),
    ],
    dependencies: [
        .package(path: "../Packages/AsyncPrimitives"),
        .package(path: "../Packages/QueueCore"),
        .package(path: "../Packages/QueueRetry"),
        .package(path: "../Packages/QueuePersistence"),
        .package(path: "../Packages/JobChain"),
        .package(path: "../Packages/TaskBroker"),
        .package(path: "../Packages/TaskBrokerConsole"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.0", traits: []),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.1.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.0"),
        // Only for the benchmarks' compile check (above): already in the graph through postgres-nio
        // and the packages.
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.0.0"),
    ],
    targets: [
        // The `queuekit` command-line tool: the end-to-end demo and a small admin CLI over a
        // TaskBroker database (an SQLite file, or PostgreSQL). The executable only calls
        // QueuekitCLI's entry point.
        .executableTarget(
            name: "queuekit",
            dependencies: ["QueuekitCLI"]
        ),
        // The commands, their argument parsing and the demo's handler.
        .target(
            name: "QueuekitCLI",
            dependencies: [
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ObjectDataSource", package: "AsyncPrimitives"),
                .product(name: "QueueRetry", package: "QueueRetry"),
                .product(name: "TaskBroker", package: "TaskBroker"),
                // `--database postgres://…`: the same commands on a PostgreSQL shared by workers.
                .product(name: "TaskBrokerPostgres", package: "TaskBroker", condition: .when(traits: ["Postgres"])),
                // The demo keeps its own bookkeeping row in the broker's database (SQLite through
                // GRDB, PostgreSQL through postgres-nio), written in the same transactions as the
                // actions it enqueues.
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["Postgres"])),
                // `queuekit serve`: the console's routes on a Hummingbird server of the tool's own.
                .product(name: "TaskBrokerConsole", package: "TaskBrokerConsole", condition: .when(traits: ["Console"])),
                .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Console"])),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Console"])),
                .product(name: "Logging", package: "swift-log", condition: .when(traits: ["Console"])),
                // `GET /metrics` of `serve` and `work --metrics`: swift-metrics in Prometheus' format.
                .product(name: "Prometheus", package: "swift-prometheus", condition: .when(traits: ["Console"])),
                .product(name: "Metrics", package: "swift-metrics", condition: .when(traits: ["Console"])),
                .product(name: "HTTPTypes", package: "swift-http-types", condition: .when(traits: ["Console"])),
            ]
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                .product(name: "AsyncPrimitives", package: "AsyncPrimitives"),
                .product(name: "AsyncPrimitivesTesting", package: "AsyncPrimitives"),
                .product(name: "QueueCore", package: "QueueCore"),
                .product(name: "QueueRetry", package: "QueueRetry"),
                .product(name: "QueuePersistence", package: "QueuePersistence"),
                .product(name: "JobChain", package: "JobChain"),
                .product(name: "TaskBroker", package: "TaskBroker"),
                // The console's workers page, tested over a broker of the test's own on PostgreSQL.
                .product(name: "TaskBrokerPostgres", package: "TaskBroker", condition: .when(traits: ["Postgres"])),
                .product(name: "ObjectDataSource", package: "AsyncPrimitives"),
                // `demo-cluster`'s trace checks, tested on traces with known faults.
                "QueuekitCLI",
                // So that `swift test` builds the binary that the subprocess tests run.
                "queuekit",
            ]
        ),
    ]
    + benchmarks,
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

// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "Integration",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .executable(name: "queuekit", targets: ["queuekit"]),
        // The tool's commands and argument parsing, for the fuzz targets (`Fuzz/`).
        .library(name: "QueuekitCLI", targets: ["QueuekitCLI"]),
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
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.0"),
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
                .product(name: "TaskBrokerPostgres", package: "TaskBroker"),
                // The demo keeps its own bookkeeping row in the broker's database (SQLite through
                // GRDB, PostgreSQL through postgres-nio), written in the same transactions as the
                // actions it enqueues.
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
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
                .product(name: "ObjectDataSource", package: "AsyncPrimitives"),
                // `demo-cluster`'s trace checks, tested on traces with known faults.
                "QueuekitCLI",
                // So that `swift test` builds the binary that the subprocess tests run.
                "queuekit",
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

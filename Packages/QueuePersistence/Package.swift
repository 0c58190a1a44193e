// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "QueuePersistence",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "QueuePersistence", targets: ["QueuePersistence"]),
        .library(name: "QueuePersistenceTesting", targets: ["QueuePersistenceTesting"]),
    ],
    dependencies: [
        // `make docs` (swift-docc-plugin): a command plugin, linked into no target.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        .package(path: "../QueueCore"),
        .package(path: "../AsyncPrimitives"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        // Property-based tests (random inputs with a replayable seed); the tests' only.
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
    ],
    targets: [
        .target(
            name: "QueuePersistence",
            dependencies: [
                .product(name: "QueueCore", package: "QueueCore"),
                .product(name: "GRDB", package: "GRDB.swift"),
                // `sqlite3_db_readonly`: SQLiteStore refuses a file SQLite could open read-only only.
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "QueuePersistenceTesting",
            dependencies: [
                "QueuePersistence",
                .product(name: "QueueCore", package: "QueueCore"),
            ]
        ),
        // Adds jobs through a persister and prints each id once `persist` has returned; the
        // crash test kills it with SIGKILL. Not a product: only the tests use it.
        .executableTarget(
            name: "QueuePersistenceCrashHelper",
            dependencies: [
                "QueuePersistence",
                .product(name: "QueueCore", package: "QueueCore"),
                // `lock PATH`: holds SQLite's write lock for the held-lock test.
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .testTarget(
            name: "QueuePersistenceTests",
            dependencies: [
                "QueuePersistence",
                "QueuePersistenceTesting",
                // Listed so that `swift test` builds the helper binary next to the tests.
                "QueuePersistenceCrashHelper",
                .product(name: "QueueCore", package: "QueueCore"),
                .product(name: "QueueCoreTesting", package: "QueueCore"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncPrimitivesTesting", package: "AsyncPrimitives"),
                .product(name: "PropertyBased", package: "swift-property-based"),
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

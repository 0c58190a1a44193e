// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "TaskBrokerBenchmarks",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    dependencies: [
        .package(path: "../"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0"),
        // The raw peer of the PostgreSQL section: a DELETE … FOR UPDATE SKIP LOCKED loop.
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
    ],
    targets: [
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

// The same settings for every QueueKit package (copied from the parent manifest).
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

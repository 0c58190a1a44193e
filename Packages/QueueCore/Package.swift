// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "QueueCore",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "QueueCore", targets: ["QueueCore"]),
        .library(name: "QueueCoreTesting", targets: ["QueueCoreTesting"]),
    ],
    dependencies: [
        // `make docs` (swift-docc-plugin): a command plugin, linked into no target.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        .package(path: "../AsyncPrimitives"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
    ],
    targets: [
        .target(
            name: "QueueCore",
            dependencies: [
                .product(name: "AsyncPrimitives", package: "AsyncPrimitives"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "DequeModule", package: "swift-collections"),
            ]
        ),
        .target(
            name: "QueueCoreTesting",
            dependencies: ["QueueCore"]
        ),
        .testTarget(
            name: "QueueCoreTests",
            dependencies: [
                "QueueCore",
                "QueueCoreTesting",
                .product(name: "AsyncPrimitivesTesting", package: "AsyncPrimitives"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
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

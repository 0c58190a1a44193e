// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "QueueRetry",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "QueueRetry", targets: ["QueueRetry"]),
    ],
    dependencies: [
        // `make docs` (swift-docc-plugin): a command plugin, linked into no target.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        .package(path: "../QueueCore"),
        .package(path: "../AsyncPrimitives"),
        // The tests' log handler (QueueCore depends on it already).
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        // Property-based tests (random inputs with a replayable seed); the tests' only.
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
    ],
    targets: [
        .target(
            name: "QueueRetry",
            dependencies: [
                .product(name: "QueueCore", package: "QueueCore"),
                .product(name: "AsyncPrimitives", package: "AsyncPrimitives"),
            ]
        ),
        .testTarget(
            name: "QueueRetryTests",
            dependencies: [
                "QueueRetry",
                .product(name: "QueueCoreTesting", package: "QueueCore"),
                .product(name: "AsyncPrimitives", package: "AsyncPrimitives"),
                .product(name: "AsyncPrimitivesTesting", package: "AsyncPrimitives"),
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "Logging", package: "swift-log"),
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

// swift-tools-version: 6.2
import PackageDescription

// TaskBroker's web console: its own package, so that a TaskBroker user who does not want it never
// resolves or builds Hummingbird.
let package = Package(
    name: "TaskBrokerConsole",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "TaskBrokerConsole", targets: ["TaskBrokerConsole"]),
    ],
    dependencies: [
        // `make docs` (swift-docc-plugin): a command plugin, linked into no target.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        .package(path: "../TaskBroker"),
        // Without its default traits: the console needs neither swift-configuration nor the
        // full-Foundation extras.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.0", traits: []),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
    ],
    targets: [
        .target(
            name: "TaskBrokerConsole",
            dependencies: [
                .product(name: "TaskBroker", package: "TaskBroker"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                // The event stream ends when the server shuts down gracefully.
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "TaskBrokerConsoleTests",
            dependencies: [
                "TaskBrokerConsole",
                .product(name: "TaskBroker", package: "TaskBroker"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// The same settings for every QueueKit package. Library targets are strict; test targets
// keep the defaults of the Swift 6 language mode, and `make test-all` fails on any warning
// they print instead.
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

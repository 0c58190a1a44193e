// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "JobChain",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "JobChain", targets: ["JobChain"]),
    ],
    dependencies: [
        .package(path: "../AsyncPrimitives"),
    ],
    targets: [
        .target(
            name: "JobChain",
            dependencies: [
                .product(name: "AsyncPrimitives", package: "AsyncPrimitives"),
            ]
        ),
        .testTarget(
            name: "JobChainTests",
            dependencies: [
                "JobChain",
                .product(name: "AsyncPrimitivesTesting", package: "AsyncPrimitives"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// The same settings for every target of every QueueKit package.
for target in package.targets {
    var settings = target.swiftSettings ?? []
    // SE-0335: `any` for existential types.
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    // SE-0444: a file sees only the members of modules it imports.
    settings.append(.enableUpcomingFeature("MemberImportVisibility"))
    // SE-0409: imports are internal unless marked `public import`.
    settings.append(.enableUpcomingFeature("InternalImportsByDefault"))
    // Public types say whether they are Sendable.
    settings.append(.treatWarning("ExplicitSendable", as: .error))
    // Zero warnings: SE-0480 warning control, applied to our own targets only.
    settings.append(.treatAllWarnings(as: .error))
    target.swiftSettings = settings
}

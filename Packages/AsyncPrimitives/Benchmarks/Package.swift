// swift-tools-version: 6.2
import PackageDescription

// Release-mode benchmarks for AsyncPrimitives against SwiftNIO's futures, measured in the same
// run: `make bench PACKAGE=AsyncPrimitives`. SwiftNIO is a dependency of this package only.
let package = Package(
    name: "AsyncPrimitivesBenchmarks",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    dependencies: [
        .package(path: "../"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.0"),
    ],
    targets: [
        .executableTarget(
            name: "AsyncPrimitivesBenchmarks",
            dependencies: [
                .product(name: "AsyncPrimitives", package: "AsyncPrimitives"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // The same rows one side at a time, synchronously, for callgrind.
        .executableTarget(
            name: "AsyncPrimitivesProfile",
            dependencies: [
                .product(name: "AsyncPrimitives", package: "AsyncPrimitives"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
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

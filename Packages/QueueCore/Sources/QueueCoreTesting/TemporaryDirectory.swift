public import Foundation

/// A fresh folder under the system's temporary folder, removed with everything in it when the
/// value is released.
public final class TemporaryDirectory: Sendable {
    /// The folder's file URL.
    public let url: URL

    /// Creates the folder.
    ///
    /// - Parameter prefix: The start of the folder's name, to tell tests apart on disk.
    /// - Throws: The file system's error when the folder cannot be created.
    public init(prefix: String = "QueueKitTests") throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("\(prefix)-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// The folder's path.
    public var path: String { url.path }

    /// The URL of `name` inside the folder (not created).
    ///
    /// - Parameter name: A file or folder name.
    /// - Returns: `url/name`.
    public func file(_ name: String) -> URL {
        url.appendingPathComponent(name)
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }
}

import Foundation
import QueueCore

/// The seed's base job, unchanged.
struct CuteJob: QueueJob, Equatable {
    private(set) var id: String = UUID().uuidString
    private(set) var createdDate = Date()
    var data: Data?
    var action: String = ""
}

/// A fresh folder under the system's temporary folder, removed when the value is dropped.
final class TemporaryDirectory: Sendable {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("QueuePersistenceTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    var path: String { url.path }

    func file(_ name: String) -> URL {
        url.appendingPathComponent(name)
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }
}

/// Every file under `url`, as paths relative to it.
func filesBelow(_ url: URL) -> [String] {
    let base = url.standardizedFileURL.path
    guard let enumerator = FileManager.default.enumerator(atPath: base) else { return [] }
    var files: [String] = []
    while let name = enumerator.nextObject() as? String {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: base + "/" + name, isDirectory: &isDirectory), !isDirectory.boolValue {
            files.append(name)
        }
    }
    return files.sorted()
}

import Foundation
import QueueCore
import QueueCoreTesting

// `CuteJob` and `TemporaryDirectory` come from QueueCoreTesting, shared by every package's tests.

/// Every file under `url`, as paths relative to it.
func filesBelow(_ url: URL) -> [String] {
    // The queue folder's owner file (`.queue-name`) is bookkeeping, not a job: not listed.
    let base = url.standardizedFileURL.path
    guard let enumerator = FileManager.default.enumerator(atPath: base) else { return [] }
    var files: [String] = []
    while let name = enumerator.nextObject() as? String {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: base + "/" + name, isDirectory: &isDirectory), !isDirectory.boolValue,
           !name.hasSuffix(".queue-name") {
            files.append(name)
        }
    }
    return files.sorted()
}

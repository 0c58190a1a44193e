import Foundation
import QueueCore
import QueueCoreTesting
@testable import QueuePersistence
import Testing

/// The owner file of a queue folder that cannot be read: whose folder it is stays unknown, so
/// no queue may take it.
@Suite(.timeLimit(.minutes(1)))
struct QueueFolderOwnerTests {
    /// "Upload-Queue" owns its folder; its owner file cannot be read (here a folder stands in its
    /// place: EISDIR, as EACCES or EMFILE would). "Upload Queue" used to take the folder as its
    /// own, and then load, run and clear the other queue's jobs. It now fails with a typed error
    /// until the owner file reads again, then gets its own folder.
    @Test func anUnreadableOwnerFileIsAnErrorNotAFolderForTheTaking() throws {
        let directory = try TemporaryDirectory()
        let dashed = FileBasedPersister(handling: CuteJob.self, queueName: "Upload-Queue", directory: directory.url)
        let theirs = CuteJob(id: "dashed-job")
        try dashed.persist([theirs])
        let folder = try #require(dashed.directory)
        let owner = folder.appendingPathComponent(QueueFolder.ownerFile)
        try FileManager.default.removeItem(at: owner)
        try FileManager.default.createDirectory(at: owner, withIntermediateDirectories: false)

        let spaced = FileBasedPersister(handling: CuteJob.self, queueName: "Upload Queue", directory: directory.url)
        let error = #expect(throws: PersistenceError.self) { try spaced.load() }
        #expect(error?.code == .storageUnavailable)
        #expect(spaced.directory == nil, "no folder yet")

        try FileManager.default.removeItem(at: owner)
        try Data("Upload-Queue".utf8).write(to: owner)
        #expect(try spaced.load() == [])
        #expect(spaced.directory != folder)
        #expect(try dashed.load() == [theirs])
    }
}

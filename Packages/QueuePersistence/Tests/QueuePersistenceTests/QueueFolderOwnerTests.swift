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

    /// A job with a long id has a hashed file name: its id is read from the file when the folder
    /// is opened. A read that failed then (EIO, EMFILE; here a folder in the file's place) left
    /// the job out of the index for the life of the process: `delete` found nothing and the job
    /// ran again after a restart. The open now fails, and is tried again at the next call.
    @Test func aJobFileThatCannotBeReadWhenTheFolderOpensIsNotLeftOutOfTheIndex() throws {
        let directory = try TemporaryDirectory()
        let job = CuteJob(id: String(repeating: ".", count: 200))
        let folder: URL
        do {
            let writer = FileBasedPersister(handling: CuteJob.self, queueName: "long-ids", directory: directory.url)
            try writer.persist([job])
            folder = try #require(writer.directory)
        }
        let file = try #require(try FileManager.default.contentsOfDirectory(atPath: folder.path).first { $0.hasSuffix(".job") })
        let original = folder.appendingPathComponent(file)
        let aside = directory.url.appendingPathComponent("aside.job")
        try FileManager.default.moveItem(at: original, to: aside)
        try FileManager.default.createDirectory(at: original, withIntermediateDirectories: false)

        let reader = FileBasedPersister(handling: CuteJob.self, queueName: "long-ids", directory: directory.url)
        let error = #expect(throws: PersistenceError.self) { try reader.load() }
        #expect(error?.code == .readFailed)

        try FileManager.default.removeItem(at: original)
        try FileManager.default.moveItem(at: aside, to: original)
        try reader.delete(job)
        #expect(try reader.load() == [], "deleted: it does not run again")
    }
}

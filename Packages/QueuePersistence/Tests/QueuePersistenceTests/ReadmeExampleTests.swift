import Foundation
import QueueCore
import QueuePersistence
import Testing
import QueueCoreTesting

@Suite(.timeLimit(.minutes(1)))
struct ReadmeExampleTests {
    @Test func readmeExampleStoresLoadsAndDeletes() throws {
        let directory = try TemporaryDirectory()
        // The README's example, with temporary locations.
        let name = "Observation Upload Queue"
        let persister = FileBasedPersister(handling: CuteJob.self, queueName: name, directory: directory.url)
        try persister.persist([CuteJob(data: Data("obs-1".utf8), action: "create")])
        let stored = try persister.load()

        let database = try SQLiteJobPersister(handling: CuteJob.self, queueName: name, path: directory.file("jobs.sqlite").path)
        try database.persist(stored)
        try database.delete(stored[0])

        #expect(stored.map(\.action) == ["create"])
        #expect(try database.load().isEmpty)
        #expect(filesBelow(directory.url).contains { $0.hasPrefix(FileBasedPersister<CuteJob>.folderName(forQueueName: name) + "/") && $0.hasSuffix(".job") })
    }
}

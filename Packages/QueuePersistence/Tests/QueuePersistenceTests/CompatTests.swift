import Foundation
import QueuePersistence
import QueuePersistenceTesting
import Testing
import QueueCoreTesting

@Suite(.timeLimit(.minutes(1)))
struct CompatTests {
    @Test(arguments: JobPersisterCompatTest.Check.allCases)
    func fileBasedPersisterPassesTheConformanceSuite(_ check: JobPersisterCompatTest.Check) async throws {
        let directory = try TemporaryDirectory()
        let root = directory.url
        try await JobPersisterCompatTest { name in
            FileBasedPersister(handling: CompatTestJob.self, queueName: name, directory: root)
        }.run(check)
    }

    @Test(arguments: JobPersisterCompatTest.Check.allCases)
    func sqlitePersisterPassesTheConformanceSuite(_ check: JobPersisterCompatTest.Check) async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("jobs.sqlite").path
        try await JobPersisterCompatTest { name in
            try SQLiteJobPersister(handling: CompatTestJob.self, queueName: name, path: path)
        }.run(check)
    }

    @Test func sqlitePersisterWithSynchronousNormalPassesTheWholeSuite() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("jobs.sqlite").path
        try await JobPersisterCompatTest { name in
            try SQLiteJobPersister(
                handling: CompatTestJob.self,
                queueName: name,
                path: path,
                configuration: .init(synchronous: .normal)
            )
        }.runAll()
    }

    @Test func aPersisterThatLosesOrderFailsTheSuite() async throws {
        let error = await #expect(throws: JobPersisterCompatFailure.self) {
            try await JobPersisterCompatTest { _ in ReversingPersister() }.run(.loadReturnsJobsInPersistOrder)
        }
        #expect(error?.check == .loadReturnsJobsInPersistOrder)
    }
    @Test func aPersisterOnTheProtocolsDefaultPersistFirstFailsOnlyThePersistFirstChecks() async throws {
        // One store shared by every name is enough for the single-store checks run here.
        let persister = AppendOnlyPersister()
        let suite = JobPersisterCompatTest { _ in persister }
        try await suite.run(.loadReturnsJobsInPersistOrder)
        for check in [JobPersisterCompatTest.Check.persistFirstMovesAStoredIDToTheFront, .persistFirstAfterDeletesAndReopening] {
            persister.clear(completion: nil)
            let error = await #expect(throws: JobPersisterCompatFailure.self) {
                try await suite.run(check)
            }
            #expect(error?.check == check)
        }
    }
}

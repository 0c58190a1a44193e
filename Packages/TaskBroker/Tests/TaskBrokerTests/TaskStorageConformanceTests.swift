import Foundation
import TaskBroker
import TaskBrokerTesting
import Testing

@Suite(.timeLimit(.minutes(1)))
struct TaskStorageConformanceTests {
    @Test(arguments: TaskStorageConformance.checks)
    func sqliteBackendPassesTheConformanceSuite(_ check: TaskStorageConformance.Check) async throws {
        let directory = try TemporaryDirectory()
        let database = try await TaskDatabase.sqlite(path: directory.path("tasks.sqlite"))
        try await check.run(on: database.storage)
    }
}

import Foundation
import TaskBroker
import TaskBrokerTesting
import Testing

@Suite(.timeLimit(.minutes(1)))
struct TaskStorageConformanceTests {
    @Test(arguments: Backend.allCases, TaskStorageConformance.checks)
    func backendPassesTheConformanceSuite(_ backend: Backend, _ check: TaskStorageConformance.Check) async throws {
        let store = try TestStore(backend)
        try await check.run(on: try await store.open().storage)
    }

    @Test(arguments: TaskStorageConformance.sharedChecks)
    func postgresPassesTheSharedBackendChecks(_ check: TaskStorageConformance.Check) async throws {
        let store = try TestStore(.postgres)
        try await check.run(on: try await store.open(leaseDuration: .seconds(1)).storage)
    }
}

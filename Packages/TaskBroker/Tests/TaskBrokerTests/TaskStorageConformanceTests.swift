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
        // 3 s: short enough for the checks that wait for a lease to expire, long enough for the
        // others to finish their claims and finishes inside one lease on a loaded machine (with
        // 1 s, a check found a kept lease already expired once in CI).
        try await check.run(on: try await store.open(leaseDuration: .seconds(3)).storage)
    }

    @Test(arguments: Backend.allCases, TaskStorageConformance.parallelChecks)
    func backendPassesTheParallelActionChecks(_ backend: Backend, _ check: TaskStorageConformance.Check) async throws {
        let store = try TestStore(backend)
        // PostgreSQL grants its own lease: 3 s, as for the shared checks (the expiry check waits for it).
        let database = backend == .postgres ? try await store.open(leaseDuration: .seconds(3)) : try await store.open()
        try await check.run(on: database.storage)
    }

    @Test(arguments: TaskStorageConformance.sharedParallelChecks)
    func postgresPassesTheSharedParallelActionChecks(_ check: TaskStorageConformance.Check) async throws {
        try await check.run(on: try await TestStore(.postgres).open().storage)
    }
}

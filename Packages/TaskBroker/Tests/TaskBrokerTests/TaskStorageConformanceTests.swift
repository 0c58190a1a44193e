import Foundation
import TaskBroker
import TaskBrokerTesting
import Testing

@Suite(.timeLimit(.minutes(3)))
struct TaskStorageConformanceTests {
    /// The lease of the PostgreSQL stores the shared checks run on.
    static let sharedLease: Duration = .seconds(6)

    @Test(arguments: Backend.allCases, TaskStorageConformance.checks)
    func backendPassesTheConformanceSuite(_ backend: Backend, _ check: TaskStorageConformance.Check) async throws {
        let store = try TestStore(backend)
        try await check.run(on: try await store.open().storage)
    }

    #if canImport(TaskBrokerPostgres)
    @Test(arguments: TaskStorageConformance.sharedChecks)
    func postgresPassesTheSharedBackendChecks(_ check: TaskStorageConformance.Check) async throws {
        let store = try TestStore(.postgres)
        // 6 s: short enough for the checks that wait for a lease to expire, long enough for the
        // others on a loaded machine. The server ends a transaction of the backend's own that sits
        // idle for half the lease: with 1 s, a check found a kept lease already expired in CI; with
        // 3 s, a claim whose client stalled 1.5 s between BEGIN and its statement was ended.
        try await check.run(on: try await store.open(leaseDuration: Self.sharedLease).storage)
    }
    #endif

    @Test(arguments: Backend.allCases, TaskStorageConformance.parallelChecks)
    func backendPassesTheParallelActionChecks(_ backend: Backend, _ check: TaskStorageConformance.Check) async throws {
        let store = try TestStore(backend)
        // PostgreSQL grants its own lease: as for the shared checks (the expiry check waits for it).
        let database = backend == .postgres ? try await store.open(leaseDuration: Self.sharedLease) : try await store.open()
        try await check.run(on: database.storage)
    }

    #if canImport(TaskBrokerPostgres)
    @Test(arguments: TaskStorageConformance.heldParallelChecks)
    func postgresPassesTheHeldBatchChecks(_ check: TaskStorageConformance.Check) async throws {
        try await check.run(on: try await TestStore(.postgres).open().storage)
    }

    @Test(arguments: TaskStorageConformance.leaseAwareReadChecks)
    func postgresPassesTheLeaseAwareReadChecks(_ check: TaskStorageConformance.Check) async throws {
        try await check.run(on: try await TestStore(.postgres).open().storage)
    }

    @Test(arguments: TaskStorageConformance.sharedParallelChecks)
    func postgresPassesTheSharedParallelActionChecks(_ check: TaskStorageConformance.Check) async throws {
        try await check.run(on: try await TestStore(.postgres).open().storage)
    }
    #endif
}

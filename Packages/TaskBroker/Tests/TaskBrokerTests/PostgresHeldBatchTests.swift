// PostgreSQL only: not compiled in a build without TaskBrokerPostgres (the AddressSanitizer run).
#if canImport(TaskBrokerPostgres)
import Foundation
import PostgresNIO
@testable import TaskBrokerCore
import TaskBroker
import TaskBrokerPostgres
import Testing

/// Plain parallel actions claimed in held batches (`HeldParallelTaskStorage`): the rows stay under
/// the claim's own transaction until the broker settles the batch.
@Suite(.timeLimit(.minutes(3)))
struct PostgresHeldBatchTests {
    /// The server ends the batch's transaction (as it does for a worker that stopped answering,
    /// or as a dropped connection does): its settlement stores nothing, says so, and its actions
    /// are ready for another worker at once, without waiting for a lease.
    @Test func aBatchWhoseTransactionEndedStoresNothingAndItsActionsAreClaimedAgainAtOnce() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open(leaseDuration: .seconds(60))
        let held = try #require(database.storage as? any HeldParallelTaskStorage)
        _ = try await held.saveParallel([NewTask(key: "a", collection: "c", queueName: "p", payload: Data()),
                                         NewTask(key: "b", collection: "c", queueName: "p", payload: Data())])
        let batch = try #require(try await held.claimParallelHeld(.prefix("p"), limit: 5, owner: "w1", leaseDuration: .seconds(60), now: Date()))
        #expect(batch.claims.map(\.task.key) == ["a", "b"])
        try await database.write { tx in
            try await tx.execute(PostgresQuery(unsafeSQL: """
                SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'taskbroker held \(store.schema)'
                """))
        }
        let settlement = await batch.settle(batch.claims.map { TaskParallelOutcome(claim: $0, result: .completed) })
        guard case .ended = settlement else {
            Issue.record("a settlement after the transaction ended is not stored: \(settlement)")
            return
        }
        let again = try await held.claimParallel(.prefix("p"), limit: 5, owner: "w2", leaseDuration: .seconds(60), now: Date())
        #expect(again.map(\.task.key) == ["a", "b"], "both are ready at once for another worker: \(again.map(\.task.key))")
    }

    /// A held claim can keep a lock on a row it did not claim (one another transaction claimed
    /// while the held claim's scan passed it), and this broker's own ordinary store of that row's
    /// outcome then waits until the batch is settled. The settlement must not wait behind that
    /// store: here the ordinary store waits for a settlement to return, and both finish.
    @Test func aHeldBatchIsSettledWhileAnOrdinaryStoreWaitsForIt() async throws {
        let store = try TestStore(.postgres)
        let flaky = FlakyStorage(try await store.open().storage, failing: [:])
        flaky.heldClaimsRefused.withLock { $0 = 1 }
        flaky.finishWaitsForASettlement.withLock { $0 = true }
        let database = TaskDatabase(storage: flaky)
        var configuration = TaskQueueBroker.Configuration(startsAutomatically: false)
        configuration.maxConcurrentParallelActions = 4
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: HoldingHandler(holding: nil), configuration: configuration)
        let events = EventRecorder(broker)
        // Claimed with leases (the first held claim is refused); its store waits.
        try await database.saveParallel(TestAction(key: "ordinary", queueName: "h-p"))
        broker.start()
        // (Ended by the test's time limit if it never comes.)
        await withTaskCancellationHandler { await flaky.finishWaiting.wait() } onCancel: { flaky.finishWaiting.open() }
        // Claimed in a held batch while that store waits.
        try await database.saveParallel(TestAction(key: "held", queueName: "h-p"))
        // Had the settlement waited behind the store, neither would end (the test's time limit).
        _ = await events.wait(for: { $0.isSuccess("ordinary") })
        _ = await events.wait(for: { $0.isSuccess("held") })
        await broker.shutdown()
        #expect(try await database.snapshot().allSatisfy { $0.parallelPending == 0 }, "both are done")
    }

    /// A batch whose last handler is still running when the batch has been held for its limit is
    /// settled with the outcomes it has: those are stored and reported at once, and the running
    /// action goes on under an ordinary claim, whose outcome is stored when it ends.
    @Test func aBatchWithASlowHandlerIsSettledWithWhatItHasAndTheSlowOneEndsAsAnOrdinaryClaim() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open()
        let handler = HoldingHandler(holding: "slow")
        var configuration = TaskQueueBroker.Configuration(startsAutomatically: false)
        configuration.maxConcurrentParallelActions = 8
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler, configuration: configuration)
        let events = EventRecorder(broker)
        try await database.saveParallel(["quick-1", "slow", "quick-2"].map { TestAction(key: $0, queueName: "h-p") })
        broker.start()
        _ = await events.wait(for: { $0.isSuccess("quick-1") })
        _ = await events.wait(for: { $0.isSuccess("quick-2") })
        #expect(!events.events.values.contains { $0.isSuccess("slow") }, "the slow one still runs")
        let slow = try #require(try await database.storage.workers().first, "the slow one is an ordinary claim of the broker's now")
        #expect(slow.parallelActions == 1, "\(slow)")
        handler.release()
        _ = await events.wait(for: { $0.isSuccess("slow") })
        #expect(!events.events.values.contains { if case .leaseLost = $0 { true } else { false } }, "no outcome was refused")
        await broker.shutdown()
        #expect(try await database.snapshot().allSatisfy { $0.parallelPending == 0 }, "all three are done")
    }
}
#endif

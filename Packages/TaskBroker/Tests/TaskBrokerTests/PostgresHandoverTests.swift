import AsyncPrimitivesTesting
import Foundation
import PostgresNIO
import Synchronization
import TaskBroker
import TaskBrokerPostgres
import Testing

/// A worker keeps a queue's lease for the next head while the queue has work, so a worker that
/// starts while the others are busy got a queue only once its holder let it go (when the queue ran
/// empty, or the holder stopped). An idle worker now asks for the queues it finds held, and a
/// holder whose slots are full hands such a queue over at its next finish.
@Suite(.timeLimit(.minutes(1)))
struct PostgresHandoverTests {
    /// The storage's side: an asking claim marks the queue, the holder's finish lets the lease go
    /// instead of keeping it (and says so), and the asker's claim is granted and clears the mark.
    /// A finish that may not yield, or a queue nobody asked for, keeps the lease as before.
    @Test func aHolderLetsAQueueGoAtItsNextFinishOnlyWhenAskedAndAllowedTo() async throws {
        let store = try TestStore(.postgres)
        let holder = try await store.open(leaseDuration: .seconds(60)).storage
        let askerDatabase = try await store.open(leaseDuration: .seconds(60))
        let asker = askerDatabase.storage
        let saved = try await holder.save(
            [("a1", "q-a"), ("a2", "q-a"), ("a3", "q-a"), ("b1", "q-b"), ("b2", "q-b")]
                .map { NewTask(key: $0.0, collection: "c", queueName: $0.1, payload: Data()) }
        )
        let (a1, a2, a3, b1, b2) = (saved[0], saved[1], saved[2], saved[3], saved[4])
        #expect(try await holder.claim([a1, b1], owner: "holder", leaseDuration: .seconds(60)) == [.granted, .granted])
        // Not asking: nothing is marked, and the holder keeps q-b for b2 though it may yield.
        let refused = try await asker.claim([b1], owner: "asker", leaseDuration: .seconds(60))
        guard case .heldElsewhere = refused.first else {
            Issue.record("q-b is held by the holder: \(refused)")
            return
        }
        let kept = try await holder.finish(
            [.completed(b1)], claimingNext: ["q-b": b2], yieldingIfWanted: ["q-b"], owner: "holder", leaseDuration: .seconds(60)
        )
        #expect(kept == TaskFinishReport(continued: ["q-b"]), "nobody asked for q-b")

        // Asking: q-a is marked. A finish that may not yield keeps the lease all the same.
        let asked = try await asker.claim([a1], owner: "asker", leaseDuration: .seconds(60), askingHolders: true)
        guard case .heldElsewhere = asked.first else {
            Issue.record("q-a is held by the holder: \(asked)")
            return
        }
        #expect(try await wantedQueues(store, askerDatabase) == ["q-a"])
        let notYielding = try await holder.finish(
            [.completed(a1)], claimingNext: ["q-a": a2], yieldingIfWanted: [], owner: "holder", leaseDuration: .seconds(60)
        )
        #expect(notYielding == TaskFinishReport(continued: ["q-a"]), "the holder was not allowed to yield")
        // The next finish may yield: q-a's lease goes, and the asker's claim of a3 is granted.
        let yielded = try await holder.finish(
            [.completed(a2)], claimingNext: ["q-a": a3], yieldingIfWanted: ["q-a"], owner: "holder", leaseDuration: .seconds(60)
        )
        #expect(yielded == TaskFinishReport(yielded: ["q-a"]), "q-a was asked for and the holder may yield it")
        #expect(try await asker.claim([a3], owner: "asker", leaseDuration: .seconds(60)) == [.granted])
        #expect(try await wantedQueues(store, askerDatabase) == [], "taking the queue clears its mark")
        // q-b, kept above, is still the holder's.
        #expect(try await asker.claim([b2], owner: "asker", leaseDuration: .seconds(60)).first != .granted)
    }

    /// A worker that runs one queue at a time holds two queues' leases: one for the action it runs,
    /// one kept for the other queue's next head, which waits for the slot. A second worker that
    /// joins the pool finds both held and has nothing else to run, so it asks; the busy worker
    /// hands over the queue whose action it finishes next, and the second worker runs that queue
    /// on. Before, the second worker waited for a lease (a minute here) that the first kept
    /// renewing until both queues were empty.
    @Test func aWorkerThatJoinsABusyPoolIsHandedAQueue() async throws {
        let store = try TestStore(.postgres)
        let first = try await store.open(leaseDuration: .seconds(60))
        let probe = ConcurrencyProbe()
        // The first worker's nth action waits for the nth permit.
        let permits = EventCollector<Bool>()
        let count = Mutex(0)
        let handlerA = RecordingHandler<TestAction> { action in
            let number = count.withLock { count -> Int in
                count += 1
                return count
            }
            _ = await permits.values(count: number)
            await probe.run(action)
        }
        let brokerA = try await TaskQueueBroker.setup(
            database: first, name: "pool", handler: handlerA, configuration: .init(maxConcurrentQueues: 1)
        )
        let keys = ["a-1", "a-2", "a-3", "a-4", "a-5", "b-1", "b-2", "b-3", "b-4", "b-5"]
        try await first.save(keys.map { TestAction(key: $0, queueName: "pool-\($0.split(separator: "-")[0])") })
        // Two actions, one of each queue, then a third that waits: the first worker holds both leases.
        permits.record(true)
        permits.record(true)
        _ = await handlerA.handled.values(count: 3)

        let second = try await store.open(leaseDuration: .seconds(60))
        let handlerB = RecordingHandler<TestAction> { action in await probe.run(action) }
        let brokerB = try await TaskQueueBroker.setup(
            database: second, name: "pool", handler: handlerB, configuration: .init(maxConcurrentQueues: 4)
        )
        // Until the second worker has asked for both queues (each look is a round trip).
        var asked: [String] = []
        for _ in 0..<10_000 where asked.count < 2 {
            asked = try await wantedQueues(store, first)
        }
        try #require(asked == ["pool-a", "pool-b"], "the idle worker asked for both queues: \(asked)")
        // The first worker finishes its third action: its queue goes to the second worker.
        let third = handlerA.handled.values[2]
        let handedOver = "pool-" + third.split(separator: "-")[0]
        permits.record(true)
        let firstOfB = await handlerB.handled.values(count: 1)
        #expect(firstOfB.first.map { "pool-" + $0.split(separator: "-")[0] } == handedOver, "B runs the queue A let go: \(firstOfB)")

        for _ in 0..<keys.count {
            permits.record(true)
        }
        _ = await probe.finished.values(count: keys.count)
        await brokerA.shutdown()
        await brokerB.shutdown()
        let handled = handlerA.handled.values + handlerB.handled.values
        #expect(handled.sorted() == keys.sorted(), "every action ran once")
        #expect(probe.overlaps == 0)
        #expect(probe.order(of: "a") == ["a-1", "a-2", "a-3", "a-4", "a-5"])
        #expect(probe.order(of: "b") == ["b-1", "b-2", "b-3", "b-4", "b-5"])
        #expect(try await first.snapshot().isEmpty)
    }

    /// The queues marked wanted, read through `database` (a `TaskDatabase` on the store's schema).
    private func wantedQueues(_ store: TestStore, _ database: TaskDatabase) async throws -> [String] {
        try await database.write { tx in
            var names: [String] = []
            for try await name in try await tx.query(
                PostgresQuery(unsafeSQL: "SELECT name FROM \"\(store.schema)\".wanted ORDER BY name")
            ).decode(String.self) {
                names.append(name)
            }
            return names
        }
    }
}

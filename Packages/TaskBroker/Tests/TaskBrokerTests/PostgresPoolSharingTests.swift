// PostgreSQL only: not compiled in a build without TaskBrokerPostgres (the AddressSanitizer run).
#if canImport(TaskBrokerPostgres)
import AsyncPrimitivesTesting
import Foundation
import Synchronization
import TaskBroker
import TaskBrokerPostgres
import Testing

/// How the workers of one pool share its queues on PostgreSQL when one of them is busy.
@Suite(.timeLimit(.minutes(3)))
struct PostgresPoolSharingTests {
    /// A worker that joins while the pool's only worker is busy gets queues before that worker
    /// runs out of work. It asks the pool for queues when its claims are refused; the busy worker,
    /// which has more ready queues than slots, then lets queues go with their outcomes.
    @Test func aWorkerThatJoinsABusyPoolGetsQueuesWhileTheOtherIsStillBusy() async throws {
        let store = try TestStore(.postgres)
        let first = try await store.open()
        let probe = ConcurrencyProbe()
        let stopped = Atomic<Bool>(false)
        let sequence = Atomic<Int>(1)
        let enqueued = EventCollector<String>()
        // A has one slot for three queues of two actions, and each of its actions enqueues another
        // of its queue until B has run one: A never runs out of work by itself, and each action it
        // starts has a next one (which its finish would claim). Before, A kept every queue it had
        // run for that next head, and B waited on those leases for as long as A ran.
        let handlerA = RecordingHandler<TestAction> { action in
            await probe.run(action)
            guard !stopped.load(ordering: .acquiring) else { return }
            let key = "\(action.key.split(separator: "-")[0])-\(sequence.add(1, ordering: .relaxed).newValue)"
            do {
                try await first.save(TestAction(key: key, queueName: action.queueName))
                enqueued.record(key)
            } catch {
                Issue.record(error, "A enqueues the next action of its queue")
            }
        }
        let handlerB = RecordingHandler<TestAction> { action in
            await probe.run(action)
            stopped.store(true, ordering: .releasing)
        }
        let initial = (0..<3).flatMap { queue in (0..<2).map { TestAction(key: "q\(queue)-\($0)", queueName: "pool-q\(queue)") } }
        try await first.save(initial)
        let brokerA = try await TaskQueueBroker.setup(
            database: first, name: "pool", handler: handlerA, configuration: .init(maxConcurrentQueues: 1)
        )
        // A has run each of the three queues at least once: it holds them all.
        _ = await handlerA.handled.values(count: 6)
        let second = try await store.open()
        let brokerB = try await TaskQueueBroker.setup(
            database: second, name: "pool", handler: handlerB, configuration: .init(maxConcurrentQueues: 3)
        )
        #expect(await handlerB.handled.values(count: 1).count == 1, "B ran an action while A was still busy")
        await brokerA.shutdown()
        await brokerB.shutdown()

        // Nothing was lost or run twice: a third worker runs what is left.
        let all = Set(initial.map(\.key) + enqueued.values)
        let ran = handlerA.handled.values + handlerB.handled.values
        #expect(Set(ran).count == ran.count, "no action ran twice")
        let left = all.subtracting(ran)
        let handlerC = RecordingHandler<TestAction> { await probe.run($0) }
        let brokerC = try await TaskQueueBroker.setup(database: first, name: "pool", handler: handlerC)
        #expect(Set(await handlerC.handled.values(count: left.count)) == left)
        await brokerC.shutdown()
        #expect(try await first.snapshot().isEmpty)
        #expect(probe.overlaps == 0, "no two actions of one queue ever ran at once")
        for queue in 0..<3 {
            let order = probe.order(of: "q\(queue)").compactMap { Int($0.split(separator: "-")[1]) }
            #expect(order == order.sorted(), "queue q\(queue) ran in enqueue order")
        }
    }

    /// The ask reaches every other database's change feed, with the pool's name as given and the
    /// asker's room, and not the asker's own feed.
    @Test func anAskForQueuesReachesOtherDatabasesWithThePoolAndTheRoom() async throws {
        let store = try TestStore(.postgres)
        let asker = try await store.open().storage
        let listener = try await store.open().storage
        var own = try #require(try await asker.changes()).makeAsyncIterator()
        var other = try #require(try await listener.changes()).makeAsyncIterator()
        let pool = "pool \"quoted\" \u{1}/ü"
        try await asker.announceSpareCapacity(pool: pool, room: 7)
        #expect(await other.next() == [.spareCapacity(pool: pool, room: 7)])
        // The asker's own feed skips its ask: the next thing it hears is this save.
        _ = try await asker.save([NewTask(key: "k", collection: "c", queueName: "q", payload: Data())])
        #expect(await own.next() == [.queuesChanged(["q"])])
        #expect(await other.next() == [.queuesChanged(["q"])])
    }
}
#endif

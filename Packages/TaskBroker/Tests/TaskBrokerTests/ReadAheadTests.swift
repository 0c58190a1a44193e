import Foundation
import TaskBroker
import Testing

/// A broker holds in memory what it runs and a read-ahead of each queue, not the queue's backlog:
/// started over a backlog it decodes only the first actions of each queue, reads on as they run,
/// and still runs every action, in order, with saves made meanwhile.
@Suite(.timeLimit(.minutes(3)))
struct ReadAheadTests {
    @Test(arguments: Backend.allCases) func aBrokerStartedOverABacklogDecodesOnlyWhatItReadsAhead(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let collection = "c-\(UUID().uuidString)"
        let queues = 4
        let stored = 300
        let later = 40
        func action(_ queue: Int, _ index: Int) -> CountedAction {
            CountedAction(key: "q\(queue)-\(index)", collection: collection, queueName: "h-q\(queue)")
        }
        try await database.save((0..<stored).flatMap { index in (0..<queues).map { action($0, index) } })
        #expect(CountedAction.decoded(in: collection) == 0)

        let handler = GatedRecordingHandler()
        var configuration = TaskQueueBroker.Configuration(maxConcurrentQueues: queues)
        configuration.readAhead = 16
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler, configuration: configuration)
        let first = await handler.handled.values(count: queues)
        #expect(Set(first) == Set((0..<queues).map { "q\($0)-0" }))
        let decodedAtStart = CountedAction.decoded(in: collection)
        #expect(decodedAtStart <= queues * configuration.readAhead, "decoded \(decodedAtStart) of \(queues * stored) stored actions")
        #expect(decodedAtStart >= queues, "each queue's head is decoded")

        // Saved while the heads run: after what each queue read ahead, so read from storage later.
        try await database.save((stored..<stored + later).flatMap { index in (0..<queues).map { action($0, index) } })
        handler.open()
        let handled = await handler.handled.values(count: queues * (stored + later))
        await broker.shutdown()
        for queue in 0..<queues {
            let expected = (0..<stored + later).map { "q\(queue)-\($0)" }
            #expect(handled.filter { $0.hasPrefix("q\(queue)-") } == expected, "queue h-q\(queue) runs everything, in order")
        }
        #expect(try await database.snapshot().isEmpty)
        let decoded = CountedAction.decoded(in: collection)
        #expect(decoded < 2 * queues * (stored + later), "each action is decoded about once: \(decoded)")
    }

    /// Started over many more queues than it runs at once, a broker reads a working set of them
    /// and the rest as those run out: it decodes a part of the backlog before its first run, and
    /// still runs every action, each queue in order.
    @Test(arguments: Backend.allCases) func aBrokerStartedOverManyQueuesDecodesAPartOfThemFirst(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let collection = "c-\(UUID().uuidString)"
        let queues = 600
        let perQueue = 3
        func action(_ queue: Int, _ index: Int) -> CountedAction {
            CountedAction(key: "q\(queue)-\(index)", collection: collection, queueName: "h-q\(queue)")
        }
        try await database.save((0..<perQueue).flatMap { index in (0..<queues).map { action($0, index) } })

        let handler = GatedRecordingHandler()
        let configuration = TaskQueueBroker.Configuration(maxConcurrentQueues: 4)
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler, configuration: configuration)
        _ = await handler.handled.values(count: 4)
        let decodedAtStart = CountedAction.decoded(in: collection)
        #expect(decodedAtStart <= queues * perQueue / 2, "decoded \(decodedAtStart) of \(queues * perQueue) stored actions before the first runs")

        handler.open()
        let handled = await handler.handled.values(count: queues * perQueue)
        await broker.shutdown()
        #expect(Set(handled).count == queues * perQueue, "every action runs once")
        let position = Dictionary(uniqueKeysWithValues: handled.enumerated().map { ($1, $0) })
        let inOrder = (0..<queues).allSatisfy { queue in
            (1..<perQueue).allSatisfy { (position["q\(queue)-\($0 - 1)"] ?? .max) < (position["q\(queue)-\($0)"] ?? .max) }
        }
        #expect(inOrder, "each queue runs in order")
        #expect(try await database.snapshot().isEmpty)
    }

    /// More stored queues than one listing returns: the broker lists them a page at a time, and
    /// runs every one.
    @Test(arguments: Backend.allCases) func aBrokerListsManyStoredQueuesAPageAtATimeAndRunsThemAll(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let queues = 2_500
        // Another broker's queues between this one's, and one that this broker's filter refuses.
        try await database.save((0..<queues).map { TestAction(key: "k\($0)", queueName: "h-q\($0)") })
        try await database.save((0..<100).map { TestAction(key: "o\($0)", queueName: "h-p\($0)") })
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler) { !$0.hasPrefix("h-p") }
        let handled = await handler.handled.values(count: queues)
        await broker.shutdown()
        #expect(Set(handled) == Set((0..<queues).map { "k\($0)" }))
        #expect(try await database.snapshot().map(\.name).sorted() == (0..<100).map { "h-p\($0)" }.sorted(), "the refused queues wait")
    }

    /// An action type with its own `sort` may run any stored action first: its queues are read whole.
    @Test(arguments: Backend.allCases) func aTypeWithItsOwnSortRunsItsWholeQueueInSortOrder(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let count = 3 * TaskQueueBroker.Configuration().readAhead
        // Saved in the reverse of their run order: the last one saved runs first.
        try await database.save((0..<count).map { PrioritizedAction(key: "p\($0)", queueName: "h-q", priority: count - $0) })
        let handler = RecordingHandler<PrioritizedAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        let handled = await handler.handled.values(count: count)
        await broker.shutdown()
        #expect(handled == (0..<count).reversed().map { "p\($0)" })
    }

    /// The same for queues shorter than the read-ahead, read in one go: on a shared backend the
    /// read takes no lease for such a type (it would claim the first action by position), and each
    /// queue still runs in sort order.
    @Test(arguments: Backend.allCases) func aTypeWithItsOwnSortRunsShortQueuesInSortOrder(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let queues = 40
        try await database.save((0..<(queues * 3)).map { index in
            PrioritizedAction(key: "p\(index)", queueName: "h-q\(index % queues)", priority: queues * 3 - index)
        })
        let handler = RecordingHandler<PrioritizedAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        let handled = await handler.handled.values(count: queues * 3)
        await broker.shutdown()
        for queue in 0..<queues {
            let order = handled.filter { (Int($0.dropFirst()) ?? 0) % queues == queue }
            #expect(order == [queue + 2 * queues, queue + queues, queue].map { "p\($0)" }, "queue h-q\(queue) in sort order: \(order)")
        }
    }
}

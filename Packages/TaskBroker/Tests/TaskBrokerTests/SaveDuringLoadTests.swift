import AsyncPrimitivesTesting
import Foundation
import TaskBroker
import Testing

/// Saves whose notifications reach a broker after the load that already read them.
@Suite(.timeLimit(.minutes(3)))
struct SaveDuringLoadTests {
    /// The audit's `[a, a, b]`: `b` then `a` saved right after `setup`; the first save makes the
    /// broker load the new queue, and the load (held here until `a` is committed) already has
    /// `a`, which runs first. The notification of `a`'s own save arrives while `a` runs.
    @Test func anActionTheLoadAlreadyReadRunsOnceWhenItsSaveArrivesLater() async throws {
        let directory = try TemporaryDirectory()
        let sqlite = try await TaskDatabase.sqlite(path: directory.path("tasks.sqlite"))
        let storage = GatedStorage(sqlite.storage, holdingReadsOf: ["handler1-queue2"])
        let database = TaskDatabase(storage: storage)
        let handler = RecordingHandler<PrioritizedAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "handler1", handler: handler)
        let recorder = EventRecorder(broker)
        try await database.save(PrioritizedAction(key: "b", queueName: "handler1-queue2", priority: 2))
        #expect(await storage.readsWaiting.values(count: 1) == ["handler1-queue2"])
        // Committed and announced while the load waits: the load will read it.
        try await database.save(PrioritizedAction(key: "a", queueName: "handler1-queue2", priority: 1))
        storage.open()
        _ = await recorder.wait { $0.isSuccess("b") }
        await broker.shutdown()
        #expect(handler.handled.values == ["a", "b"])
        #expect(try await database.snapshot().isEmpty)
    }

    /// An action saved into a new queue while `setup` lists the stored queues (after the list was
    /// read, before `setup` returned) runs: the broker listens before it lists them. It listened
    /// only after, and the save reached no one: the action stayed stored, unrun, until a restart.
    @Test func anActionSavedIntoANewQueueWhileSetupListsTheQueuesRuns() async throws {
        let directory = try TemporaryDirectory()
        let sqlite = try await TaskDatabase.sqlite(path: directory.path("tasks.sqlite"))
        let storage = GatedStorage(sqlite.storage, holdingReadsOf: [], holdingQueueNames: true)
        let database = TaskDatabase(storage: storage)
        let handler = RecordingHandler<TestAction>()
        async let settingUp = TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        #expect(await storage.readsWaiting.values(count: 1) == ["queueNames()"])
        try await database.save(TestAction(key: "new", queueName: "h-new"))
        storage.open()
        let broker = try await settingUp
        #expect(await handler.handled.values(count: 1) == ["new"])
        await broker.shutdown()
        #expect(try await database.snapshot().isEmpty)
    }

    /// Many saves into several queues while the broker loads them: six queues stored before
    /// `setup` (their loads wait until a third of the saves are committed, then race the rest)
    /// and six new ones (each loaded when its first save arrives, racing the saves after it).
    @Test func savesRacingStartupRunEachActionOnceInQueueOrder() async throws {
        let storedQueues = (0..<6).map { "h-q\($0)" }
        let queues = storedQueues + (0..<6).map { "h-new\($0)" }
        let storedPerQueue = 1
        let savedPerQueue = 60
        let directory = try TemporaryDirectory()
        let path = directory.path("tasks.sqlite")
        do {
            let database = try await TaskDatabase.sqlite(path: path, configuration: .init(synchronous: .off))
            for queue in storedQueues {
                try await database.save((0..<storedPerQueue).map { TestAction(key: "\(queue)-s\($0)", queueName: queue) })
            }
        }
        let sqlite = try await TaskDatabase.sqlite(path: path, configuration: .init(synchronous: .off))
        let storage = GatedStorage(sqlite.storage, holdingReadsOf: Set(storedQueues))
        let database = TaskDatabase(storage: storage)
        let committed = EventCollector<String>()
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for queue in queues {
                group.addTask {
                    // One at a time, two at a time: each save is its own commit and notification.
                    var index = 0
                    while index < savedPerQueue {
                        let count = index % 3 == 0 ? 2 : 1
                        try await database.save((index..<index + count).map { TestAction(key: "\(queue)-n\($0)", queueName: queue) })
                        index += count
                        committed.record(queue)
                    }
                }
            }
            _ = await committed.values(count: queues.count * savedPerQueue / 3 * 2 / 3)
            storage.open()
            try await group.waitForAll()
        }
        let total = storedQueues.count * storedPerQueue + queues.count * savedPerQueue
        let handled = await handler.handled.values(count: total)
        await broker.shutdown()
        #expect(handler.handled.count == total)
        #expect(Set(handled).count == total)
        for queue in queues {
            let stored = storedQueues.contains(queue) ? (0..<storedPerQueue).map { "\(queue)-s\($0)" } : []
            let expected = stored + (0..<savedPerQueue).map { "\(queue)-n\($0)" }
            #expect(handled.filter { $0.hasPrefix("\(queue)-") } == expected)
        }
        #expect(try await database.snapshot().isEmpty)
    }
}

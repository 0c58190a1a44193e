import AsyncPrimitivesTesting
import Foundation
import GRDB
@testable import TaskBrokerCore
@testable import TaskBrokerSQLite
import TaskBroker
#if canImport(TaskBrokerPostgres)
import TaskBrokerPostgres
#endif
import Testing

/// `save(_:notBefore:)`: an action stored at once that starts no earlier than its time, holding
/// only its own queue, across restarts, with one timer for the earliest time a broker knows of.
@Suite(.timeLimit(.minutes(3)))
struct RunLaterTests {
    let start = Date(timeIntervalSince1970: 1_800_000_000.25)

    @Test(arguments: Backend.allCases) func anActionSavedToRunLaterStartsAtItsTimeAndHoldsOnlyItsQueue(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let clock = ManualClock()
        let handler = RecordingHandler<TestAction>()
        let start = self.start
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: handler, configuration: .init(wallClock: { start }), clock: clock
        )
        try await database.save(TestAction(key: "later", queueName: "h-1"), notBefore: start.addingTimeInterval(10))
        try await database.save([TestAction(key: "behind", queueName: "h-1"), TestAction(key: "other", queueName: "h-2")])
        #expect(await handler.handled.values(count: 1) == ["other"], "another queue is not held")
        #expect(try await database.snapshot().first { $0.name == "h-1" }?.pending == 2, "both are stored at once")
        clock.advance(by: .milliseconds(9_999))
        #expect(handler.handled.count == 1)
        clock.advance(by: .milliseconds(1))
        #expect(await handler.handled.values(count: 3) == ["other", "later", "behind"], "its queue's later actions wait behind it")
        await broker.shutdown()
    }

    @Test(arguments: Backend.allCases) func aTimeSurvivesARestartAndAPastTimeRunsAtOnce(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        try await database.save(TestAction(key: "tomorrow", queueName: "h-1"), notBefore: start.addingTimeInterval(86_400))
        try await database.save(TestAction(key: "yesterday", queueName: "h-2"), notBefore: start.addingTimeInterval(-86_400))

        // A day less 400 seconds later, a broker starts.
        let clock = ManualClock()
        let handler = RecordingHandler<TestAction>()
        let start = self.start
        let broker = try await TaskQueueBroker.setup(
            database: try await store.open(), name: "h", handler: handler,
            configuration: .init(wallClock: { start.addingTimeInterval(86_000) }), clock: clock
        )
        #expect(await handler.handled.values(count: 1) == ["yesterday"])
        clock.advance(by: .seconds(399))
        #expect(handler.handled.count == 1)
        clock.advance(by: .seconds(1))
        #expect(await handler.handled.values(count: 2) == ["yesterday", "tomorrow"])
        await broker.shutdown()
    }

    /// Fifty queues whose heads wait for fifty different times hold one timer, not fifty, and run
    /// in time order as the clock reaches each.
    @Test(arguments: Backend.allCases) func manyWaitingQueuesHoldOneTimer(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        for index in 1...50 {
            try await database.save(TestAction(key: "k\(index)", queueName: "h-\(index)"), notBefore: start.addingTimeInterval(Double(index)))
        }
        // Read in the same page as the waiting queues (names sort after them): once it ran, they were read.
        try await database.save(TestAction(key: "marker", queueName: "h-~"))
        let clock = ManualClock()
        let handler = RecordingHandler<TestAction>()
        let start = self.start
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: handler, configuration: .init(wallClock: { start }), clock: clock
        )
        #expect(await handler.handled.values(count: 1) == ["marker"])
        // Beside the renewal of the running marker's lease (PostgreSQL).
        let view = broker.engineView()
        #expect(view.timers - view.renewalTimers == 1, "one timer for fifty waiting queues: \(view.timers) with \(view.renewalTimers) renewal")
        clock.advance(by: .seconds(1))
        #expect(await handler.handled.values(count: 2) == ["marker", "k1"])
        clock.advance(by: .seconds(1))
        #expect(await handler.handled.values(count: 3) == ["marker", "k1", "k2"])
        // Due together: they start together, up to the cap, in any order.
        clock.advance(by: .seconds(48))
        #expect(Set(await handler.handled.values(count: 51).dropFirst(3)) == Set((3...50).map { "k\($0)" }))
        await broker.shutdown()
    }

    @Test func aTimeThatIsNoTimeIsRefusedAndNothingIsSaved() async throws {
        let directory = try TemporaryDirectory()
        let database = try await TaskDatabase.sqlite(path: directory.path("tasks.sqlite"))
        await #expect { try await database.save(TestAction(key: "a", queueName: "q"), notBefore: Date(timeIntervalSince1970: .nan)) } throws: { error in
            (error as? TaskBrokerError)?.code == .invalidArgument
        }
        await #expect { try await database.save([TestAction(key: "b", queueName: "q")], notBefore: Date(timeIntervalSince1970: .infinity)) } throws: { error in
            (error as? TaskBrokerError)?.code == .invalidArgument
        }
        #expect(try await database.snapshot().isEmpty)
    }

    /// Inside `database.write`, with the caller's own rows: SQLite.
    @Test func aTransactionSavesAnActionToRunLaterOnSQLite() async throws {
        let store = try TestStore(.sqlite)
        let database = try await store.open()
        let start = self.start
        try await database.write { tx in
            try tx.db.execute(sql: "CREATE TABLE orders (id INTEGER PRIMARY KEY)")
            try tx.db.execute(sql: "INSERT INTO orders (id) VALUES (1)")
            try tx.save(TestAction(key: "remind", queueName: "h-1"), notBefore: start.addingTimeInterval(60))
        }
        try await runsAtItsTime(database, key: "remind", after: .seconds(60))
    }

    /// Inside `database.write`, with the caller's own rows: PostgreSQL.
    #if canImport(TaskBrokerPostgres)
    @Test func aTransactionSavesAnActionToRunLaterOnPostgres() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open()
        let start = self.start
        try await database.write { tx in
            try await tx.execute("CREATE TABLE \(unescaped: "\"\(store.schema)\"").orders (id int PRIMARY KEY)")
            try await tx.save(TestAction(key: "remind", queueName: "h-1"), notBefore: start.addingTimeInterval(60))
        }
        try await runsAtItsTime(database, key: "remind", after: .seconds(60))
    }
    #endif

    private func runsAtItsTime(_ database: TaskDatabase, key: String, after delay: Duration) async throws {
        let clock = ManualClock()
        let handler = RecordingHandler<TestAction>()
        let start = self.start
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: handler, configuration: .init(wallClock: { start }), clock: clock
        )
        let stored = try await database.storage.tasks(inQueue: "h-1")
        #expect(stored.first?.notBefore == start.addingTimeInterval(delay.timeInterval))
        clock.advance(by: delay - .milliseconds(2))
        #expect(handler.handled.count == 0)
        clock.advance(by: .milliseconds(2))
        #expect(await handler.handled.values(count: 1) == [key])
        await broker.shutdown()
    }
}

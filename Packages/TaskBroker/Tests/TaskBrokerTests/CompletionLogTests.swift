import Foundation
import GRDB
import TaskBroker
import Testing

/// The SQLite backend logs completions and applies the log in bulk; nothing of that shows.
@Suite(.timeLimit(.minutes(1)))
struct CompletionLogTests {
    private static func count(_ table: String, at path: String) throws -> Int {
        try DatabaseQueue(path: path).read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table)") ?? -1 }
    }

    @Test func completionsAreAppliedInBulkOnceTheLogIsLongAndNoRowIsLeftBehind() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("tasks.sqlite")
        let database = try await TaskDatabase.sqlite(path: path)
        let total = 5_000
        let saved = try await database.storage.save((0..<total).map {
            NewTask(key: "k\($0)", collection: "c", queueName: "q\($0 % 7)", payload: Data("{}".utf8))
        })
        for start in stride(from: 0, to: 4_000, by: 100) {
            try await database.storage.finish(saved[start..<start + 100].map { .completed($0) }, owner: "w")
        }
        // Below the threshold: the rows are still on disk, but no read sees them.
        #expect(try Self.count("taskbroker_done", at: path) == 4_000)
        #expect(try await database.snapshot().reduce(0) { $0 + $1.pending } == 1_000)
        try await database.storage.finish(saved[4_000..<4_100].map { .completed($0) }, owner: "w")
        // Past it: the log was applied and emptied in the same transaction.
        #expect(try Self.count("taskbroker_done", at: path) == 0)
        #expect(try Self.count("taskbroker_action", at: path) == 900)
        let left = try await (0..<7).asyncFlatMap { try await database.storage.tasks(inQueue: "q\($0)") }
        #expect(Set(left.map(\.key)) == Set((4_100..<total).map { "k\($0)" }))
    }

    @Test func aCompletedActionSavedAgainRunsAgainAfterARestart() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("tasks.sqlite")
        do {
            let database = try await TaskDatabase.sqlite(path: path)
            let handler = RecordingHandler<TestAction>()
            let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
            try await database.save([TestAction(key: "a", queueName: "h-q"), TestAction(key: "b", queueName: "h-q")])
            _ = await handler.handled.values(count: 2)
            await broker.shutdown()
            try await database.save(TestAction(key: "a", queueName: "h-q"))
        }
        let database = try await TaskDatabase.sqlite(path: path)
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        #expect(await handler.handled.values(count: 1) == ["a"])
        await broker.shutdown()
        #expect(try await database.snapshot().isEmpty)
    }
}

extension Range where Bound == Int {
    fileprivate func asyncFlatMap<T>(_ body: (Int) async throws -> [T]) async rethrows -> [T] {
        var result: [T] = []
        for index in self { result += try await body(index) }
        return result
    }
}

import Foundation
import GRDB
#if canImport(TaskBrokerPostgres)
import PostgresNIO
#endif
import TaskBroker
#if canImport(TaskBrokerPostgres)
import TaskBrokerPostgres
#endif
import Testing

/// `saveIfAbsent` as users rely on it: once per key, also when several writers race, and inside
/// the caller's own transaction.
@Suite(.timeLimit(.minutes(3)))
struct UniqueSaveTests {
    /// Two databases (two connection pools, as two processes have) save the same fifty keys at
    /// once: each key is stored once, and exactly one of the two saves of each reports it stored.
    #if canImport(TaskBrokerPostgres)
    @Test func uniqueSavesRacingFromTwoPoolsStoreEachKeyOnce() async throws {
        let store = try TestStore(.postgres)
        let first = try await store.open()
        let second = try await store.open()
        let keys = (0..<50).map { "k\($0)" }
        async let fromFirst = Self.saveAll(keys, into: first, payloadQueue: "h-1")
        async let fromSecond = Self.saveAll(keys, into: second, payloadQueue: "h-1")
        let (a, b) = try await (fromFirst, fromSecond)
        #expect(zip(a, b).allSatisfy { $0 != $1 }, "one save of each key stored it: \(a) \(b)")
        #expect(try await first.storage.tasks(inQueue: "h-1").map(\.key).sorted() == keys.sorted())
    }
    #endif

    private static func saveAll(_ keys: [String], into database: TaskDatabase, payloadQueue: String) async throws -> [Bool] {
        var stored: [Bool] = []
        for key in keys {
            stored.append(try await database.saveIfAbsent(TestAction(key: key, queueName: payloadQueue)))
        }
        return stored
    }

    @Test(arguments: Backend.allCases) func aUniqueSaveOfARunningActionIsRefusedAndTheActionRunsOnce(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = HoldingHandler(holding: "a")
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        #expect(try await database.saveIfAbsent(TestAction(key: "a", queueName: "h-q")))
        #expect(await handler.runs.values(count: 1) == ["a"])
        #expect(try await database.saveIfAbsent(TestAction(key: "a", queueName: "h-q")) == false, "a running action is stored")
        try await database.save(TestAction(key: "b", queueName: "h-q"))
        handler.release()
        #expect(await handler.runs.values(count: 2) == ["a", "b"], "a ran once")
        await broker.shutdown()
    }

    /// A reminder scheduled once however many requests ask for it: the first unique save stores
    /// its time and priority, the others (of the database and of a transaction) change nothing.
    @Test(arguments: Backend.allCases) func aUniqueSaveToRunLaterKeepsTheFirstTimeAndPriority(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let first = Date(timeIntervalSince1970: 1_900_000_000)
        #expect(try await database.saveIfAbsent(TestAction(key: "remind", queueName: "h-q"), notBefore: first, priority: 3))
        #expect(try await database.saveIfAbsent(TestAction(key: "remind", queueName: "h-q"), notBefore: first.addingTimeInterval(60)) == false)
        let again: Bool
        switch backend {
        case .sqlite:
            again = try await database.write { tx in try tx.saveIfAbsent(TestAction(key: "remind", queueName: "h-q"), notBefore: nil, priority: 9) }
        #if canImport(TaskBrokerPostgres)
        case .postgres:
            again = try await database.write { (tx: PostgresTaskTransaction) in
                try await tx.saveIfAbsent(TestAction(key: "remind", queueName: "h-q"), notBefore: nil, priority: 9)
            }
        #else
        case .postgres:
            throw PostgresTestServer.NotBuilt()
        #endif
        }
        #expect(again == false)
        let stored = try await database.storage.tasks(inQueue: "h-q")
        #expect(stored.map(\.key) == ["remind"])
        #expect(stored.first?.notBefore == first && stored.first?.priority == 3, "\(stored)")
        await #expect(throws: TaskBrokerError.self) {
            try await database.saveIfAbsent(TestAction(key: "nan", queueName: "h-q"), notBefore: Date(timeIntervalSince1970: .nan))
        }
    }

    @Test func aUniqueSaveJoinsTheCallersSQLiteTransaction() async throws {
        let store = try TestStore(.sqlite)
        let database = try await store.open()
        let stored = try await database.write { tx in
            try tx.db.execute(sql: "CREATE TABLE signup (email TEXT PRIMARY KEY)")
            try tx.db.execute(sql: "INSERT INTO signup (email) VALUES ('a@example.com')")
            return [
                try tx.saveIfAbsent(TestAction(key: "welcome-a", queueName: "mail")),
                try tx.saveIfAbsent(TestAction(key: "welcome-a", queueName: "mail")),
            ]
        }
        #expect(stored == [true, false])
        // Rolled back with the transaction: nothing is stored, and the key is free again.
        await #expect(throws: (any Error).self) {
            try await database.write { tx in
                try tx.saveIfAbsent(TestAction(key: "welcome-b", queueName: "mail"))
                try tx.db.execute(sql: "INSERT INTO signup (email) VALUES ('a@example.com')")  // a duplicate: fails
            }
        }
        #expect(try await database.storage.tasks(inQueue: "mail").map(\.key) == ["welcome-a"])
        #expect(try await database.saveIfAbsent(TestAction(key: "welcome-b", queueName: "mail")))
    }

    #if canImport(TaskBrokerPostgres)
    @Test func aUniqueSaveJoinsTheCallersPostgresTransaction() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open()
        let stored = try await database.write { tx in
            [
                try await tx.saveIfAbsent(TestAction(key: "welcome-a", queueName: "mail")),
                try await tx.saveIfAbsent(TestAction(key: "welcome-a", queueName: "mail")),
            ]
        }
        #expect(stored == [true, false])
        #expect(try await database.storage.tasks(inQueue: "mail").map(\.key) == ["welcome-a"])
    }
    #endif
}

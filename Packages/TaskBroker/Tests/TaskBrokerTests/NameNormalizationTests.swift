import TaskBroker
import Testing

/// Swift compares strings by canonical equivalence, SQLite and PostgreSQL by bytes: "café" with a
/// precomposed é (NFC) and with e and a combining accent (NFD, as macOS file names spell it) are
/// one name to Swift and two to the database. Names, keys and collections are stored in NFC, so
/// each is one name everywhere: a queue saved under both spellings is one queue, whose actions
/// all run, in order; a key saved under one spelling is replaced and deleted under the other.
@Suite(.timeLimit(.minutes(3)))
struct NameNormalizationTests {
    static let nfc = "caf\u{E9}"
    static let nfd = "cafe\u{301}"

    @Test(arguments: Backend.allCases) func aNameSpelledTwoWaysIsOneQueueWhoseActionsAllRun(_ backend: Backend) async throws {
        #expect(Self.nfc == Self.nfd && Array(Self.nfc.utf8) != Array(Self.nfd.utf8), "one name to Swift, two spellings in bytes")
        let store = try TestStore(backend)
        let database = try await store.open()
        try await database.save([
            TestAction(key: "a", queueName: "h-\(Self.nfd)"), TestAction(key: "b", queueName: "h-\(Self.nfc)"),
            TestAction(key: "c", queueName: "h-\(Self.nfd)"),
        ])
        // A key saved under one spelling is replaced under the other, and deleted under the first.
        try await database.save(TestAction(key: "k-\(Self.nfd)", collection: Self.nfd, queueName: "h-other"))
        try await database.save(TestAction(key: "k-\(Self.nfc)", collection: Self.nfc, queueName: "h-other"))
        try await database.save(TestAction(key: "gone-\(Self.nfc)", queueName: "h-other"))
        #expect(try await database.delete(key: "gone-\(Self.nfd)", collection: "actions"))
        let queues = try await database.snapshot()
        #expect(queues.map(\.pending).sorted() == [1, 3], "two queues, of 3 and 1 actions: \(queues)")

        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        let handled = await handler.handled.values(count: 4)
        #expect(handled.filter { ["a", "b", "c"].contains($0) } == ["a", "b", "c"], "one queue, in order: \(handled)")
        #expect(handled.filter { $0.hasPrefix("k-") }.count == 1)
        await broker.shutdown()
        #expect(try await database.snapshot().isEmpty, "nothing is left stranded under another spelling")
    }

    @Test(arguments: Backend.allCases) func aBrokerNameSpelledTheOtherWayClaimsItsQueues(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        try await database.save(TestAction(key: "a", queueName: "\(Self.nfc)-q"))
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: Self.nfd, handler: handler)
        #expect(await handler.handled.values(count: 1) == ["a"])
        try await broker.restartQueues(["\(Self.nfd)-q"])
        await broker.shutdown()
        #expect(try await database.snapshot().isEmpty)
    }
}

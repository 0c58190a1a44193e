import Foundation
import GRDB
import QueueRetry
import TaskBroker
import Testing

/// The handler's attempt number, opening existing files only, events from the start, clear
/// errors for corrupt files, durable commits by default.
@Suite(.timeLimit(.minutes(3)))
struct FollowUpAPITests {
    @Test(arguments: Backend.allCases) func handlerLearnsWhichAttemptItRuns(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = ContextRecordingHandler()
        handler.script("a", .retry(after: .zero), .retry(after: .zero))
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        try await database.save([TestAction(key: "a", queueName: "h-q"), TestAction(key: "b", queueName: "h-q")])
        #expect(await handler.runs.values(count: 4) == ["a#1@h-q", "a#2@h-q", "a#3@h-q", "b#1@h-q"])
        await broker.shutdown()
    }

    @Test(arguments: Backend.allCases) func attemptNumbersCarryAcrossARestart(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        do {
            let database = try await store.open()
            let handler = ContextRecordingHandler()
            handler.script("a", .waitForRestart)
            let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
            let recorder = EventRecorder(broker)
            try await database.save(TestAction(key: "a", queueName: "h-q"))
            _ = await recorder.wait { $0.isFailure }
            await broker.shutdown()
        }
        let database = try await store.open()
        let handler = ContextRecordingHandler()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        try await broker.restartQueues(["h-q"])
        #expect(await handler.runs.values(count: 1) == ["a#2@h-q"])
        await broker.shutdown()
    }

    @Test(arguments: [(1, 2), (2, 4), (3, 8), (4, 10), (40, 10)])
    func retryWithBackoffDoublesFromTheAttemptUpToTheCap(attempt: Int, seconds: Int) {
        let context = TaskContext(queueName: "q", key: "k", collection: "c", attempt: attempt)
        let backoff = Backoff(initial: .seconds(2), maximum: .seconds(10))
        #expect(context.retry(with: backoff) == .retry(after: .seconds(seconds)))
        #expect(TaskResult.retry(backoff: backoff, attempt: attempt) == .retry(after: .seconds(seconds)))
        #expect(context.previousFailures == attempt - 1)
    }

    @Test func retryWithJitterStaysWithinTheBackoffRange() {
        var generator = SystemRandomNumberGenerator()
        let context = TaskContext(queueName: "q", key: "k", collection: "c", attempt: 3)
        for _ in 0..<50 {
            guard case .retry(let after) = context.retry(with: Backoff(initial: .seconds(1), jitter: 0.5), using: &generator) else {
                Issue.record("not a retry")
                return
            }
            #expect(after >= .seconds(2) && after <= .seconds(4))
        }
    }

    @Test func openingAnExistingFileOnlyRefusesAMissingOneAndCreatesNothing() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("tasks.sqlite")
        let error = await #expect(throws: TaskBrokerError.self) {
            _ = try await TaskDatabase.sqlite(path: path, configuration: .init(createsMissingFile: false))
        }
        #expect(error?.code == .databaseNotFound)
        #expect(!FileManager.default.fileExists(atPath: path))
        try await TaskDatabase.sqlite(path: path).save(TestAction(key: "a", queueName: "h-q"))
        let existing = try await TaskDatabase.sqlite(path: path, configuration: .init(createsMissingFile: false))
        #expect(try await existing.snapshot().map(\.pending) == [1])
    }

    @Test func aFileThatIsNotADatabaseSaysSoInsteadOfBlamingTheDirectory() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("garbage.sqlite")
        try Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }).write(to: URL(fileURLWithPath: path))
        let error = await #expect(throws: TaskBrokerError.self) {
            _ = try await TaskDatabase.sqlite(path: path)
        }
        #expect(error?.code == .corruptDatabase)
        #expect(error?.message.contains("is not a QueueKit SQLite database or is corrupt") == true)
        #expect(error?.message.contains("writable") == false)
        // The cause stays GRDB's error, for tools that print SQLite's own words.
        #expect((error?.underlying as? DatabaseError)?.resultCode == .SQLITE_NOTADB)
    }

    @Test(arguments: [(TaskDatabase.Configuration.Synchronous.full, 2), (.normal, 1)])
    func commitsUseTheConfiguredSynchronousLevel(level: TaskDatabase.Configuration.Synchronous, pragma: Int) async throws {
        let directory = try TemporaryDirectory()
        let database = try await TaskDatabase.sqlite(path: directory.path("tasks.sqlite"), configuration: .init(synchronous: level))
        // `write` runs on the writer connection, the one that commits actions and outcomes.
        #expect(try await database.write { tx in try Int.fetchOne(tx.db, sql: "PRAGMA synchronous") } == pragma)
        #expect(try await database.write { tx in try String.fetchOne(tx.db, sql: "PRAGMA journal_mode") } == "wal")
    }

    @Test(arguments: Backend.allCases) func aBrokerNotStartedAutomaticallyRunsNothingUntilStartAndItsEventsMissNothing(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        try await database.save(TestAction(key: "stored", queueName: "h-q"))
        let handler = ContextRecordingHandler()
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: handler, configuration: .init(startsAutomatically: false)
        )
        let recorder = EventRecorder(broker)
        try await database.save(TestAction(key: "saved", queueName: "h-q"))
        #expect(handler.runs.values.isEmpty)
        #expect(try await broker.snapshot().map(\.pending) == [2])
        broker.start()
        broker.start()  // a second call does nothing
        let events = await recorder.wait { $0.isSuccess("saved") }
        #expect(events == [
            .started(queueName: "h-q", key: "stored", collection: "actions", attempt: 1),
            .succeeded(queueName: "h-q", key: "stored", collection: "actions"),
            .started(queueName: "h-q", key: "saved", collection: "actions", attempt: 1),
            .succeeded(queueName: "h-q", key: "saved", collection: "actions"),
        ])
        await broker.shutdown()
    }

    @Test(arguments: Backend.allCases) func shuttingDownABrokerThatNeverStartedKeepsItsActions(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        try await database.save(TestAction(key: "stored", queueName: "h-q"))
        let handler = ContextRecordingHandler()
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: handler, configuration: .init(startsAutomatically: false)
        )
        let recorder = EventRecorder(broker)
        await broker.shutdown()
        #expect(await recorder.wait { $0 == .stopped } == [.stopped])
        #expect(handler.runs.values.isEmpty)
        #expect(try await database.snapshot().map(\.pending) == [1])
    }

    @Test(arguments: Backend.allCases) func aZeroTimeoutRetryEmitsNoResumedEvent(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        try await database.save(TestAction(key: "a", queueName: "h-q"))
        let handler = ContextRecordingHandler()
        handler.script("a", .retry(after: .zero))
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: handler, configuration: .init(startsAutomatically: false)
        )
        let recorder = EventRecorder(broker)
        broker.start()
        let events = await recorder.wait { $0.isSuccess("a") }
        #expect(events == [
            .started(queueName: "h-q", key: "a", collection: "actions", attempt: 1),
            .failed(queueName: "h-q", key: "a", collection: "actions", result: .retry(after: .zero)),
            .started(queueName: "h-q", key: "a", collection: "actions", attempt: 2),
            .succeeded(queueName: "h-q", key: "a", collection: "actions"),
        ])
        await broker.shutdown()
    }
}

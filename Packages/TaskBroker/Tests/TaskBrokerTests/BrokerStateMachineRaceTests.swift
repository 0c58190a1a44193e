import Foundation
import GRDB
import Testing
@testable import TaskBrokerCore
@testable import TaskBrokerSQLite
import TaskBroker

/// Changes that reach the machine in an order that differs from what storage committed.
struct BrokerStateMachineRaceTests {
    /// The queue is restarted right after the finish that paused it (`waitForRestart`) was
    /// committed, and the restart is heard before that outcome is reported stored (SQLite announces
    /// the restart from its commit; the committer reports the finish once its write returns). The
    /// restart found nothing paused in memory, and the stored outcome then paused the queue in
    /// memory only: storage said it may run, the broker waited for another restart. Now the queue
    /// is read again once the outcome is stored, and runs.
    @Test func aRestartHeardBeforeThePauseItClearsIsStoredStillRunsTheQueue() {
        var h = MachineHarness()
        let a = h.entry("a", "q")
        _ = h.send(.start(["q"]))
        #expect(h.send(MachineHarness.loaded("q", [a])).runs == ["a"])
        _ = h.send(.changes([.resumed(["q"])]))
        let stored = h.send(.stored([.failure(a, .waitForRestart, pause: .untilRestart)]))
        #expect(stored.loads == [["q"]], "what storage holds now is read")
        var resumed = a
        resumed.task.attempts = 1
        #expect(h.send(MachineHarness.loaded("q", [resumed])).runs == ["a"], "the restarted action runs")
    }

    /// A read that answers while the action in flight shows that action's outcome already
    /// committed (its attempts grew) may also show what came after it (here: the restart): the
    /// queue is read again once the outcome is reported stored.
    @Test func aReadThatAlreadyShowsTheOutcomeInFlightIsReadAgainAfterIt() {
        var h = MachineHarness()
        let a = h.entry("a", "q")
        _ = h.send(.start(["q"]))
        #expect(h.send(MachineHarness.loaded("q", [a])).runs == ["a"])
        #expect(h.send(.changes([.reload(["q"])])).loads == [["q"]])
        var restarted = a
        restarted.task.attempts = 1
        _ = h.send(MachineHarness.loaded("q", [restarted]))
        #expect(h.send(.stored([.failure(a, .waitForRestart, pause: .untilRestart)])).loads == [["q"]])
        #expect(h.send(MachineHarness.loaded("q", [restarted])).runs == ["a"])
    }

    /// An action moved to another queue (saved again with the same key under another queue name)
    /// while its old queue is being read: the read, from before the move, still shows the old
    /// version. It used to take the action back from the new queue: the old version ran, and the
    /// new one stayed stored, unrun, until its queue was read again.
    @Test func aReadFromBeforeAMoveDoesNotTakeTheMovedActionBack() {
        var h = MachineHarness()
        let h0 = h.entry("h0", "new")
        let k1 = h.entry("k", "old")
        _ = h.send(.start(["old", "new"]))
        #expect(h.send(MachineHarness.loaded("new", [h0])).runs == ["h0"])
        var k2 = h.resaved(k1)
        k2.task.queueName = "new"
        _ = h.send(.changes([.saved(k2)]))
        #expect(h.send(MachineHarness.loaded("old", [k1])).runs.isEmpty, "the old version does not run")
        #expect(h.send(.stored([.success(h0)])).runs == ["k"], "the moved action runs in its new queue")
    }
}

/// Another process's changes that this process missed (SQLite: its change journal was pruned past
/// what this process had read).
@Suite(.timeLimit(.minutes(3)))
struct MissedChangesTests {
    /// Every queue the broker holds is read again, not only the stored ones: a queue another
    /// process emptied meanwhile (its actions deleted, or purged) is no longer stored, and was left
    /// as the broker knew it, so its cancelled actions ran.
    @Test func missedChangesReadEveryHeldQueueAgain() {
        var h = MachineHarness()
        let k1 = h.entry("k1", "z")
        let k2 = h.entry("k2", "z")
        _ = h.send(.start(["z"]))
        #expect(h.send(MachineHarness.loaded("z", [k1, k2])).runs == ["k1"])
        #expect(h.send(.changes([.reloadEverything(["other"])])).loads == [["other", "z"]])
        _ = h.send(MachineHarness.loaded("z", []), MachineHarness.loaded("other", []))
        #expect(h.send(.stored([.success(k1)])).runs.isEmpty, "k2, deleted by the other process, does not run")
    }

    /// The watcher of a file tells the brokers that every queue may have changed when it finds the
    /// journal pruned past what it read (here: more than the journal keeps, journaled by another
    /// process in one write).
    @Test func aWatcherThatFellBehindTheJournalSaysEveryQueueMayHaveChanged() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("tasks.sqlite")
        let database = try await TaskDatabase.sqlite(path: path)
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: RecordingHandler<TestAction>())
        let (heard, hear) = AsyncStream<[TaskChange]>.makeStream()
        let listener = database.hub.notifier.add { hear.yield($0) }
        defer { database.hub.notifier.remove(listener) }
        // Of a queue no broker here runs: it stays stored.
        try await database.save(TestAction(key: "a", queueName: "other-stored"))
        // Another process's write, as its journal shows it: more entries than the journal keeps.
        // It waits for the broker's own writes, as a process with TaskBroker's busy timeout does.
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        try await DatabaseQueue(path: path, configuration: configuration).write { db in
            for index in 0..<(SQLiteTaskStorage.journalLength + 100) {
                try db.execute(sql: "INSERT INTO taskbroker_change (queue_name, origin) VALUES (?, 'another process')", arguments: ["h-x\(index)"])
            }
            let last = db.lastInsertedRowID
            try db.execute(sql: "DELETE FROM taskbroker_change WHERE seq <= ?", arguments: [last - SQLiteTaskStorage.journalLength])
        }
        let signal = try FileHandle(forWritingTo: URL(fileURLWithPath: path + "-taskbroker.lock"))
        try signal.write(contentsOf: Data([0x2A]))
        try signal.close()
        var everywhere: [String]?
        for await changes in heard {
            for case .externalEverywhere(let stored) in changes { everywhere = stored }
            if everywhere != nil { break }
            if changes.contains(where: { if case .external = $0 { true } else { false } }) { break }
        }
        #expect(everywhere == ["other-stored"], "every queue may have changed; other-stored is stored")
        await broker.shutdown()
    }
}

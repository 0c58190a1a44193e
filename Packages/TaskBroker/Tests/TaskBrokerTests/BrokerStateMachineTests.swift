import Foundation
@testable import TaskBrokerCore
@testable import TaskBrokerSQLite
import TaskBroker
import Testing

/// Every scheduling rule of the broker, on the state machine alone: no database, no clock, no task.
@Suite struct BrokerStateMachineTests {
    // MARK: Order and concurrency

    @Test func storedQueuesAreReadBeforeAnythingRunsThenRunHeadFirst() {
        var h = MachineHarness()
        let out = h.send(.start(["q1", "q2"]))
        #expect(out.loads == [["q1", "q2"]])
        #expect(out.runs.isEmpty)
        let a = h.entry("a", "q1")
        let b = h.entry("b", "q1")
        let started = h.send(MachineHarness.loaded("q1", [a, b]))
        #expect(started.runs == ["a"])
        #expect(started.events == [.started(queueName: "q1", key: "a", collection: "c", attempt: 1)])
    }

    /// A long-running broker does not keep every queue name it ever saw: above the limit, idle
    /// queues are forgotten (and their claim among this process's brokers handed back), busy ones
    /// kept, names it ignores dropped; a forgotten queue is read again when it changes.
    @Test func idleQueuesAndIgnoredNamesAreForgottenAboveTheLimit() {
        final class Names { var forgotten: [String] = [] }
        let names = Names()
        var h = MachineHarness(keepsIdleQueuesUpTo: 4, accepts: { !$0.hasPrefix("other") }, forgets: { names.forgotten += $0 })
        let entries = (0..<4).map { h.entry("a\($0)", "q\($0)") }
        _ = h.send(.start(entries.map(\.task.queueName)))
        for entry in entries {
            _ = h.send(MachineHarness.loaded(entry.task.queueName, [entry]))
        }
        _ = h.send(.stored(entries.prefix(3).map { .success($0) }))
        #expect(names.forgotten.isEmpty, "four queues kept: none forgotten yet")
        let loads = h.send(.changes([.saved(h.entry("b", "q4"))])).loads
        #expect(loads == [["q4"]])
        #expect(names.forgotten.sorted() == ["q0", "q1", "q2"])
        #expect(h.machine.queues.keys.sorted() == ["q3", "q4"], "q3 runs, q4 is being read")
        _ = h.send(.changes((0..<5).map { .saved(h.entry("o\($0)", "other\($0)")) }))
        #expect(h.machine.ignored.count <= 4)
        #expect(h.send(.changes([.saved(h.entry("c", "q0"))])).loads == [["q0"]], "a forgotten queue is read again")
    }

    @Test func eachQueueRunsOneActionAtATimeInOrder() {
        var h = MachineHarness()
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        let c = h.entry("c", "q")
        _ = h.send(.start(["q"]))
        #expect(h.send(MachineHarness.loaded("q", [a, b, c])).runs == ["a"])
        // A save while a runs waits its turn.
        let d = h.entry("d", "q")
        #expect(h.send(.changes([.saved(d)])).runs.isEmpty)
        let next = h.send(.stored([.success(a)]))
        #expect(next.events.first == .succeeded(queueName: "q", key: "a", collection: "c"))
        #expect(next.runs == ["b"])
        #expect(h.send(.stored([.success(b)])).runs == ["c"])
        #expect(h.send(.stored([.success(c)])).runs == ["d"])
        #expect(h.send(.stored([.success(d)])).runs.isEmpty)
        #expect(h.machine.running == 0)
    }

    @Test func concurrentQueuesAreCappedAndAFreedSlotGoesToTheLongestWaitingQueue() {
        var h = MachineHarness(maxConcurrentQueues: 2)
        let a1 = h.entry("a1", "a")
        let a2 = h.entry("a2", "a")
        let b1 = h.entry("b1", "b")
        let c1 = h.entry("c1", "c")
        let out = h.send(.changes([.saved(a1), .saved(a2), .saved(b1), .saved(c1)]))
        #expect(out.loads == [["a", "b", "c"]])
        let started = h.send(
            MachineHarness.loaded("a", [a1, a2]), MachineHarness.loaded("b", [b1]), MachineHarness.loaded("c", [c1])
        )
        #expect(started.runs == ["a1", "b1"])
        #expect(h.machine.running == 2)
        // a is ready again, but c has waited longer.
        #expect(h.send(.stored([.success(a1)])).runs == ["c1"])
        #expect(h.send(.stored([.success(b1)])).runs == ["a2"])
    }

    @Test func customSortDecidesTheHeadAndTiesKeepEnqueueOrder() {
        var h = MachineHarness()
        _ = h.send(.start(["q"]))
        _ = h.send(MachineHarness.loaded("q", []))
        let late = h.entry("late", "q", priority: 3)
        let running = h.send(.changes([.saved(late)]))
        #expect(running.runs == ["late"])
        let tie1 = h.entry("tie-1", "q", priority: 2)
        let first = h.entry("first", "q", priority: 1)
        let tie2 = h.entry("tie-2", "q", priority: 2)
        _ = h.send(.changes([.saved(tie1), .saved(first), .saved(tie2)]))
        #expect(h.send(.stored([.success(late)])).runs == ["first"])
        #expect(h.send(.stored([.success(first)])).runs == ["tie-1"])
        #expect(h.send(.stored([.success(tie1)])).runs == ["tie-2"])
    }

    // MARK: Failures and pauses

    @Test func aFailedActionStaysFirstAndRunsAgainWithItsAttemptCounted() {
        var h = MachineHarness()
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        _ = h.send(.start(["q"]))
        _ = h.send(MachineHarness.loaded("q", [a, b]))
        let retry = h.send(.stored([.failure(a)]))
        #expect(retry.events.contains(.failed(queueName: "q", key: "a", collection: "c", result: .retry(after: .zero))))
        #expect(retry.runs == ["a"])
        #expect(retry.runEntries.first?.task.attempts == 1)
        #expect(retry.events.contains(.started(queueName: "q", key: "a", collection: "c", attempt: 2)))
    }

    @Test func aTimedRetryPausesTheQueueUntilItsTimerFires() throws {
        var h = MachineHarness()
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        _ = h.send(.start(["q"]))
        _ = h.send(MachineHarness.loaded("q", [a, b]))
        let date = Date(timeIntervalSince1970: 2_000_000_000)
        let paused = h.send(.stored([.failure(a, .retry(after: .seconds(5)), pause: .until(date))]))
        #expect(paused.runs.isEmpty)
        let timer = try #require(paused.timers.first)
        #expect(timer.delay == .until(date))
        #expect(h.send(.timerFired(timer.token + 100)).runs.isEmpty, "an unknown timer changes nothing")
        let resumed = h.send(.timerFired(timer.token))
        #expect(resumed.events.first == .resumed(queueName: "q"))
        #expect(resumed.runs == ["a"])
    }

    @Test func waitForRestartPausesTheQueueUntilItIsResumed() {
        var h = MachineHarness()
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        _ = h.send(.start(["q"]))
        _ = h.send(MachineHarness.loaded("q", [a, b]))
        let paused = h.send(.stored([.failure(a, .waitForRestart, pause: .untilRestart)]))
        #expect(paused.runs.isEmpty && paused.timers.isEmpty)
        #expect(h.send(.changes([.saved(h.entry("c", "q"))])).runs.isEmpty, "a paused queue runs nothing")
        let resumed = h.send(.changes([.resumed(["q"])]))
        #expect(resumed.events == [.resumed(queueName: "q"), .started(queueName: "q", key: "a", collection: "c", attempt: 2)])
    }

    /// A restart heard while the paused queue is being read (another process's change, or the
    /// failure's own notice, started the read) is still reported once the read is applied, also
    /// when the read already shows the pause cleared.
    @Test func aRestartHeardWhileThePausedQueueIsReadIsReportedOnce() {
        var h = MachineHarness()
        let a = h.entry("a", "q")
        _ = h.send(.start(["q"]))
        _ = h.send(MachineHarness.loaded("q", [a]))
        _ = h.send(.stored([.failure(a, .waitForRestart, pause: .untilRestart)]))
        #expect(h.send(.changes([.reload(["q"])])).loads == [["q"]])
        #expect(h.send(.changes([.resumed(["q"])])).events.isEmpty, "held until the read is applied")
        var restarted = a
        restarted.task.attempts = 1
        let read = h.send(MachineHarness.loaded("q", [restarted]))
        #expect(read.events == [.resumed(queueName: "q"), .started(queueName: "q", key: "a", collection: "c", attempt: 2)])
    }

    @Test func aStoredPausedHeadStaysPausedAndAnOverdueOneGetsItsTimer() throws {
        var h = MachineHarness()
        let paused = h.entry("a", "q1", attempts: 1, pause: .untilRestart)
        let waiting = h.entry("b", "q1")
        let date = Date(timeIntervalSince1970: 1_000)
        let timed = h.entry("c", "q2", attempts: 2, pause: .until(date))
        _ = h.send(.start(["q1", "q2"]))
        let out = h.send(MachineHarness.loaded("q1", [paused, waiting]), MachineHarness.loaded("q2", [timed]))
        #expect(out.runs.isEmpty)
        let timer = try #require(out.timers.first)
        #expect(timer.delay == .until(date))
        #expect(h.send(.timerFired(timer.token)).runEntries.map(\.task.attempts) == [2])
    }

    @Test func anUndecodableActionPausesItsQueueDurably() {
        var h = MachineHarness()
        let bad = h.entry("bad", "q", undecodable: true)
        _ = h.send(.start(["q"]))
        let out = h.send(MachineHarness.loaded("q", [bad, h.entry("b", "q")]))
        #expect(out.runs.isEmpty)
        #expect(out.events.contains(.undecodable(queueName: "q", key: "bad", collection: "c")))
        #expect(out.stores.first?.first?.pause == .untilRestart)
    }

    // MARK: Revisions

    @Test func theOutcomeOfADeletedActionIsDiscardedAndTheNextOneRuns() {
        var h = MachineHarness()
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        _ = h.send(.start(["q"]))
        _ = h.send(MachineHarness.loaded("q", [a, b]))
        #expect(h.send(.changes([.deleted(a.task)])).runs.isEmpty, "b waits while a is still in flight")
        let out = h.send(.stored([.failure(a, .waitForRestart, pause: .untilRestart)]))
        #expect(out.events.first == .discarded(queueName: "q", key: "a", collection: "c"))
        #expect(out.runs == ["b"])
    }

    @Test func aRunningActionSavedAgainRunsItsNewVersionNextInItsPlace() {
        var h = MachineHarness()
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        _ = h.send(.start(["q"]))
        _ = h.send(MachineHarness.loaded("q", [a, b]))
        let newA = h.resaved(a)
        #expect(h.send(.changes([.saved(newA)])).runs.isEmpty)
        let out = h.send(.stored([.success(a)]))
        #expect(out.events.first == .discarded(queueName: "q", key: "a", collection: "c"))
        #expect(out.runEntries.map(\.task.revision) == [newA.task.revision])
    }

    @Test func aSaveTheReadAlreadySawIsNotAppliedTwice() {
        var h = MachineHarness()
        _ = h.send(.start(["q"]))
        let a = h.entry("a", "q")
        _ = h.send(.changes([.saved(a)]))  // buffered while q is read
        let out = h.send(MachineHarness.loaded("q", [a]))
        #expect(out.runs == ["a"])
        #expect(h.send(.changes([.saved(a)])).runs.isEmpty, "a late notification of the same save")
        #expect(h.send(.stored([.success(a)])).runs.isEmpty, "a ran once")
    }

    @Test func changesDuringAReadWaitForItAndKeepTheStoredOrder() {
        var h = MachineHarness()
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        _ = h.send(.start(["q"]))
        let c = h.entry("c", "q")
        #expect(h.send(.changes([.saved(c), .deleted(b.task)])).runs.isEmpty, "nothing runs before the read")
        #expect(h.send(MachineHarness.loaded("q", [a, b])).runs == ["a"])
        #expect(h.send(.stored([.success(a)])).runs == ["c"], "b was deleted during the read; c came after a")
    }

    @Test func aPurgeDuringAReadReadsTheQueueAgain() {
        var h = MachineHarness()
        _ = h.send(.start(["q"]))
        _ = h.send(.changes([.purged("q")]))
        let out = h.send(MachineHarness.loaded("q", [h.entry("stale", "q")]))
        #expect(out.loads == [["q"]])
        #expect(out.runs.isEmpty)
        #expect(h.send(MachineHarness.loaded("q", [h.entry("fresh", "q")])).runs == ["fresh"])
    }

    @Test func aPurgeForgetsTheQueueAndDiscardsTheOutcomeInFlight() {
        var h = MachineHarness()
        let a = h.entry("a", "q")
        _ = h.send(.start(["q"]))
        _ = h.send(MachineHarness.loaded("q", [a, h.entry("b", "q")]))
        _ = h.send(.changes([.purged("q")]))
        let out = h.send(.stored([.success(a)]))
        #expect(out.events == [.discarded(queueName: "q", key: "a", collection: "c")])
        #expect(out.runs.isEmpty)
    }

    @Test func anActionMovedToAnotherQueueLeavesItsOldOne() {
        var h = MachineHarness()
        let a = h.entry("a", "q1")
        let b = h.entry("b", "q1")
        _ = h.send(.start(["q1"]))
        _ = h.send(MachineHarness.loaded("q1", [a, b]))
        var moved = h.resaved(b)
        moved.task.queueName = "q2"
        let out = h.send(.changes([.saved(moved)]))
        #expect(out.loads == [["q2"]])
        #expect(h.send(MachineHarness.loaded("q2", [moved])).runs == ["b"])
        #expect(h.send(.stored([.success(a)])).runs.isEmpty, "b is no longer in q1")
    }

    @Test func queuesTheBrokerDoesNotClaimAreIgnored() {
        var h = MachineHarness(accepts: { $0.hasPrefix("mine-") })
        let out = h.send(.changes([.saved(h.entry("x", "other-q")), .saved(h.entry("y", "mine-q"))]))
        #expect(out.loads == [["mine-q"]])
    }

    @Test func anotherProcessesChangeRereadsTheQueueAndKeepsTheActionInFlight() {
        var h = MachineHarness()
        let a = h.entry("a", "q")
        _ = h.send(.start(["q"]))
        _ = h.send(MachineHarness.loaded("q", [a]))
        #expect(h.send(.changes([.reload(["q"])])).loads == [["q"]])
        let b = h.entry("b", "q")
        let c = h.entry("c", "q")
        #expect(h.send(MachineHarness.loaded("q", [a, b, c])).runs.isEmpty, "a is still in flight")
        let out = h.send(.stored([.success(a)]))
        #expect(out.events.first == .succeeded(queueName: "q", key: "a", collection: "c"))
        #expect(out.runs == ["b"])
        #expect(h.send(.stored([.success(b)])).runs == ["c"])
    }

    @Test func aReadThatBeganBeforeAnOutcomeWasStoredIsReadAgainNotRunTwice() {
        var h = MachineHarness()
        let a = h.entry("a", "q")
        _ = h.send(.start(["q"]))
        #expect(h.send(MachineHarness.loaded("q", [a])).runs == ["a"])
        // Another process saves b: the queue is read while a runs...
        #expect(h.send(.changes([.reload(["q"])])).loads == [["q"]])
        // ...a's success is stored before that read answers...
        #expect(h.send(.stored([.success(a)])).runs.isEmpty, "nothing runs while the queue is read")
        // ...and the read, whose snapshot predates the commit, still shows a.
        let b = h.entry("b", "q")
        let stale = h.send(MachineHarness.loaded("q", [a, b]))
        #expect(stale.runs.isEmpty, "a is done: it must not run again")
        #expect(stale.loads == [["q"]], "the queue is read again")
        #expect(h.send(MachineHarness.loaded("q", [b])).runs == ["b"])
    }

    @Test func anotherProcessesResumeIsSeenThroughARead() {
        var h = MachineHarness()
        let a = h.entry("a", "q", attempts: 1, pause: .untilRestart)
        _ = h.send(.start(["q"]))
        #expect(h.send(MachineHarness.loaded("q", [a])).runs.isEmpty)
        _ = h.send(.changes([.reload(["q"])]))
        var resumed = a
        resumed.task.pause = nil
        let out = h.send(MachineHarness.loaded("q", [resumed]))
        #expect(out.events == [.started(queueName: "q", key: "a", collection: "c", attempt: 2)])
    }

    // MARK: Storage faults

    @Test func aFailedReadIsRetriedWithBackoffAndNothingRunsAheadOfTheStoredActions() throws {
        var h = MachineHarness()
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        _ = h.send(.start(["q"]))
        let failed = h.send(.loadFailed(["q"], message: "disk I/O error"))
        #expect(failed.storageFailures == ["load q 0.1 seconds"])
        let timer = try #require(failed.timers.first)
        #expect(timer.delay == .after(.milliseconds(100)))
        let c = h.entry("c", "q")
        #expect(h.send(.changes([.saved(c)])).runs.isEmpty, "a later save does not overtake the stored actions")
        #expect(h.send(.timerFired(timer.token)).loads == [["q"]])
        let again = h.send(.loadFailed(["q"], message: "disk I/O error"))
        #expect(again.storageFailures == ["load q 0.2 seconds"], "the backoff doubles")
        _ = h.send(.timerFired(try #require(again.timers.first).token))
        let recovered = h.send(MachineHarness.loaded("q", [a, b]))
        #expect(recovered.events.first == .storageRecovered(operation: .load, queueNames: ["q"]))
        #expect(recovered.runs == ["a"])
        #expect(h.send(.stored([.success(a)])).runs == ["b"])
        #expect(h.send(.stored([.success(b)])).runs == ["c"])
    }

    @Test func aFailedCommitKeepsTheQueueWaitingAndIsStoredAgain() throws {
        var h = MachineHarness()
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        let x = h.entry("x", "other")
        _ = h.send(.start(["q", "other"]))
        _ = h.send(MachineHarness.loaded("q", [a, b]), MachineHarness.loaded("other", [x]))
        let failed = h.send(.storeFailed([.success(a)], message: "database is locked"))
        #expect(failed.storageFailures == ["store q 0.1 seconds"])
        #expect(failed.runs.isEmpty, "b waits: a's outcome is not stored yet")
        #expect(h.machine.running == 2)
        #expect(h.send(.stored([.success(x)])).events == [.succeeded(queueName: "other", key: "x", collection: "c")], "other queues go on")
        let retry = h.send(.timerFired(try #require(failed.timers.first).token))
        #expect(retry.stores.first?.map(\.task.key) == ["a"])
        let stored = h.send(.stored([.success(a)]))
        #expect(stored.events.first == .storageRecovered(operation: .store, queueNames: ["q"]))
        #expect(stored.runs == ["b"])
    }

    @Test func aFailedClaimIsRetriedAndARefusedOneRereadsTheQueue() throws {
        var h = MachineHarness(claimsHeads: true)
        let a = h.entry("a", "q")
        _ = h.send(.start(["q"]))
        let claim = h.send(MachineHarness.loaded("q", [a]))
        #expect(claim.claims == [["a"]])
        #expect(claim.runs.isEmpty, "nothing runs before its claim")
        let failed = h.send(.claimFailed([a.task], message: "connection reset"))
        #expect(failed.storageFailures == ["claim q 0.1 seconds"])
        #expect(h.machine.running == 0)
        #expect(h.send(.timerFired(try #require(failed.timers.first).token)).claims == [["a"]])
        let refused = h.send(.claimed([a.task], results: [.changed]))
        #expect(refused.events == [.storageRecovered(operation: .claim, queueNames: ["q"])], "the claim answered")
        #expect(refused.loads == [["q"]], "refused: read the queue again")
        #expect(h.send(MachineHarness.loaded("q", [a])).claims == [["a"]])
        #expect(h.send(.claimed([a.task], results: [.granted()])).runs == ["a"])
    }

    // MARK: Lifetime

    @Test func shutdownStartsNothingNewAndFinishesOnceTheRunningOutcomesAreStored() {
        var h = MachineHarness()
        let a = h.entry("a", "q1")
        _ = h.send(.start(["q1", "q2"]))
        _ = h.send(MachineHarness.loaded("q1", [a, h.entry("b", "q1")]))
        let stopping = h.send(.shutdown)
        #expect(!stopping.finishes)
        #expect(h.send(MachineHarness.loaded("q2", [h.entry("c", "q2")])).runs.isEmpty)
        let out = h.send(.stored([.success(a)]))
        #expect(out.runs.isEmpty)
        #expect(out.finishes)
    }

    @Test func aBrokerStoppingWhileItsClaimRunsReleasesTheLeasesItIsGrantedThenFinishes() {
        var h = MachineHarness(claimsHeads: true)
        let a = h.entry("a", "q1")
        let b = h.entry("b", "q2")
        let c = h.entry("c", "q3")
        _ = h.send(.start(["q1", "q2", "q3"]))
        let claiming = h.send(MachineHarness.loaded("q1", [a]), MachineHarness.loaded("q2", [b]), MachineHarness.loaded("q3", [c]))
        #expect(claiming.claims == [["a", "b", "c"]])
        #expect(!h.send(.shutdown).finishes, "the claim is still under way")
        let out = h.send(.claimed([a.task, b.task, c.task], results: [.granted(), .changed, .heldElsewhere(until: Date(timeIntervalSince1970: 2_000))]))
        #expect(out.runs.isEmpty, "a stopping broker starts nothing")
        #expect(out.releases == [["q1"]], "only the lease granted is let go")
        #expect(out.finishes)
    }

    @Test func aRunningBrokerWhoseHeadChangedDuringTheClaimKeepsTheLeaseAndClaimsTheNewHead() {
        var h = MachineHarness(claimsHeads: true)
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        _ = h.send(.start(["q"]))
        #expect(h.send(MachineHarness.loaded("q", [a, b])).claims == [["a"]])
        let deleted = h.send(.changes([.deleted(a.task)]))
        #expect(deleted.claims.isEmpty, "a's claim is still under way")
        let out = h.send(.claimed([a.task], results: [.granted()]))
        #expect(out.releases.isEmpty, "the lease is kept for the queue's next head")
        #expect(out.runs.isEmpty)
        #expect(out.claims == [["b"]])
    }

    @Test func abandoningCancelsHandlersTimersAndDrainsTheCommitterBeforeFinishing() throws {
        var h = MachineHarness()
        let a = h.entry("a", "q1")
        let b = h.entry("b", "q2")
        _ = h.send(.start(["q1", "q2"]))
        _ = h.send(MachineHarness.loaded("q1", [a]), MachineHarness.loaded("q2", [b]))
        let failed = h.send(.storeFailed([.success(b)], message: "locked"))
        let token = try #require(failed.timers.first).token
        _ = h.send(.shutdown)
        let abandon = h.send(.abandon)
        #expect(abandon.cancelsHandlers && abandon.drainsCommitter)
        #expect(abandon.cancelledTimers == [token])
        #expect(!abandon.finishes)
        #expect(h.send(.timerFired(token)).stores.isEmpty, "a cancelled retry stores nothing")
        #expect(h.send(.committerDrained).finishes)
        #expect(h.send(.changes([.saved(h.entry("late", "q1"))])).isEmpty, "nothing happens after the end")
    }

    @Test func aLostLeaseReportsTheRefusedOutcomeAndRereadsTheQueue() {
        var h = MachineHarness(claimsHeads: true)
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        _ = h.send(.start(["q"]))
        _ = h.send(MachineHarness.loaded("q", [a, b]))
        #expect(h.send(.claimed([a.task], results: [.granted()])).runs == ["a"])
        #expect(h.send(.leaseLost(["q"])).isEmpty, "nothing happens until the refused outcome is back")
        let out = h.send(.stored([.success(a)]))
        #expect(out.events == [.leaseLost(queueName: "q", key: "a", collection: "c")])
        #expect(out.loads == [["q"]], "what this broker knew of the queue is stale: read it again")
        #expect(out.claims.isEmpty && out.runs.isEmpty)
        #expect(h.machine.running == 0)
        // The other worker still runs `a`: this broker's claim is refused until it lets go.
        let until = Date(timeIntervalSince1970: 2_000)
        #expect(h.send(MachineHarness.loaded("q", [a, b])).claims == [["a"]])
        let held = h.send(.claimed([a.task], results: [.heldElsewhere(until: until)]))
        #expect(held.timers.map(\.delay) == [.until(until), .after(.seconds(3))], "wait for the lease to expire, and pause between asks")
        #expect(held.asks == 1, "this worker has room: it asks the pool for queues")
        #expect(held.claims.isEmpty && held.runs.isEmpty)
    }

    @Test func aQueueHeldElsewhereWaitsForTheLeaseToExpireNotForEveryCompletion() throws {
        var h = MachineHarness(claimsHeads: true)
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        let c = h.entry("c", "q2")
        _ = h.send(.start(["q", "q2"]))
        _ = h.send(MachineHarness.loaded("q", [a, b]), MachineHarness.loaded("q2", [c]))
        let until = Date(timeIntervalSince1970: 2_000)
        let held = h.send(.claimed([a.task, c.task], results: [.heldElsewhere(until: until), .granted()]))
        #expect(held.runs == ["c"], "a queue held elsewhere does not hold up the others")
        let timer = try #require(held.timers.first)
        #expect(h.machine.running == 1, "the held queue takes no slot")
        // The holder completes `a`: this broker forgets it but keeps waiting (the holder goes on with `b`).
        let completed = h.send(.changes([.deleted(a.task)]))
        #expect(completed.claims.isEmpty, "no claim race with the holder on every completion")
        // The lease may have expired (its holder died): claim the head again, without reading the
        // queue first (the claim checks the head against storage).
        let expired = h.send(.timerFired(timer.token))
        #expect(expired.loads.isEmpty)
        #expect(expired.claims == [["b"]])
        #expect(h.send(.claimed([b.task], results: [.granted()])).runs == ["b"], "taken over")
    }

    @Test func aQueueTakenOverFromAWorkerWhoseLeaseExpiredTakesTheNextFreeSlotBeforeTheLine() throws {
        var h = MachineHarness(maxConcurrentQueues: 1, claimsHeads: true)
        let a = h.entry("a", "q")
        let b1 = h.entry("b1", "r")
        let b2 = h.entry("b2", "r")
        let c = h.entry("c", "s")
        _ = h.send(.start(["q", "r", "s"]))
        let first = h.send(MachineHarness.loaded("q", [a]), MachineHarness.loaded("r", [b1, b2]), MachineHarness.loaded("s", [c]))
        #expect(first.claims == [["a"]])
        // Another worker runs q: this broker's one slot goes to r; s waits in the line.
        let held = h.send(.claimed([a.task], results: [.heldElsewhere(until: Date(timeIntervalSince1970: 2_000))]))
        let timer = try #require(held.timers.first)
        #expect(held.claims == [["b1"]])
        #expect(h.send(.claimed([b1.task], results: [.granted()])).runs == ["b1"])
        // The holder died: its lease expires while the slot is busy.
        let expired = h.send(.timerFired(timer.token))
        #expect(expired.loads.isEmpty && expired.claims.isEmpty, "the slot is still busy")
        // The freed slot goes to the queue taken over, ahead of s (which waited in the line) and r.
        #expect(h.send(.stored([.success(b1)])).claims == [["a"]])
        #expect(h.send(.claimed([a.task], results: [.granted()])).runs == ["a"])
        #expect(h.send(.stored([.success(a)])).claims == [["c"]], "then the line in its order")
        #expect(h.send(.claimed([c.task], results: [.granted()])).runs == ["c"])
        #expect(h.send(.stored([.success(c)])).claims == [["b2"]])
    }

    @Test func aChangeToAQueueHeldElsewhereRereadsItAtOnce() throws {
        var h = MachineHarness(claimsHeads: true)
        let a = h.entry("a", "q")
        _ = h.send(.start(["q"]))
        _ = h.send(MachineHarness.loaded("q", [a]))
        let held = h.send(.claimed([a.task], results: [.heldElsewhere(until: Date(timeIntervalSince1970: 2_000))]))
        let timer = try #require(held.timers.first)
        let changed = h.send(.changes([.reload(["q"])]))
        #expect(changed.cancelledTimers == [timer.token], "the lease wait ends")
        #expect(changed.loads == [["q"]])
        #expect(h.send(.timerFired(timer.token)).isEmpty, "a cancelled lease timer does nothing")
        #expect(h.send(MachineHarness.loaded("q", [a])).claims == [["a"]])
    }

    // MARK: Next heads claimed with their predecessor's outcome (shared backends)

    @Test func aHeadClaimedWithItsPredecessorsOutcomeStartsWithoutAClaimOfItsOwn() throws {
        var h = MachineHarness(claimsHeads: true)
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        let c = h.entry("c", "q")
        _ = h.send(.start(["q"]))
        #expect(h.send(MachineHarness.loaded("q", [a, b, c])).claims == [["a"]])
        let first = h.send(.claimed([a.task], results: [.granted()]))
        #expect(first.runs == ["a"])
        #expect(first.nextHeads == ["b"], "a's finish is to claim b")
        // The finish stored a's success and claimed b: b starts at once, with no claim.
        let next = h.send(.continued(["q"]), .stored([.success(a, next: b)]))
        #expect(next.claims.isEmpty)
        #expect(next.runs == ["b"])
        #expect(next.nextHeads == ["c"])
        #expect(next.timers.map(\.delay) == [.after(.seconds(2))], "the claim is good for its lifetime")
        // A finish that did not claim the next head (storage said no): c is claimed on its own.
        let last = h.send(.stored([.success(b, next: c)]))
        #expect(last.runs.isEmpty)
        #expect(last.claims == [["c"]])
        #expect(h.send(.claimed([c.task], results: [.granted()])).nextHeads == [nil], "nothing comes after c")
    }

    /// After a stall of the whole process (SIGSTOP, a paused VM) longer than the claim's lifetime,
    /// the finish's report and the claim's timer arrive together. The report that frees the slot
    /// comes first here: the head must not start on a claim whose lease another worker may hold
    /// by now. Its age counts from when the finish was sent, not from when the report is handled.
    @Test(arguments: [(sentAt: Duration.seconds(9), startsOnTheClaim: true), (sentAt: .seconds(7), startsOnTheClaim: false)])
    func aHeadClaimedWithAFinishStartsOnThatClaimOnlyWhileItIsYoung(sentAt: Duration, startsOnTheClaim: Bool) throws {
        var h = MachineHarness(claimsHeads: true)
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        _ = h.send(.start(["q"]))
        _ = h.send(MachineHarness.loaded("q", [a, b]))
        #expect(h.send(.claimed([a.task], results: [.granted()])).nextHeads == ["b"])
        // The report is handled at 10 s; the claim's lifetime is 2 s.
        h.machine.now = .seconds(10)
        let out = h.send(.continued(["q"], sentAt: sentAt), .stored([.success(a, next: b)]))
        if startsOnTheClaim {
            #expect(out.runs == ["b"], "sent a second ago: b starts on the finish's claim")
            #expect(out.claims.isEmpty)
        } else {
            #expect(out.runs.isEmpty, "sent three seconds ago, past the claim's lifetime")
            #expect(out.claims == [["b"]], "b is claimed on its own")
        }
    }

    /// The same for a claim of its own: granted before a stall and handled after it, a claim
    /// older than its lifetime (a quarter of the lease; 3 s here) starts nothing: the queue is
    /// read and claimed again.
    @Test(arguments: [(sentAt: Duration.seconds(9), starts: true), (sentAt: .seconds(6), starts: false)])
    func aHeadStartsOnAGrantedClaimOnlyWhileTheClaimIsYoung(sentAt: Duration, starts: Bool) throws {
        var h = MachineHarness(claimsHeads: true)
        let a = h.entry("a", "q")
        _ = h.send(.start(["q"]))
        #expect(h.send(MachineHarness.loaded("q", [a])).claims == [["a"]])
        h.machine.now = .seconds(10)
        let out = h.send(.claimed([a.task], results: [.granted()], sentAt: sentAt))
        #expect(out.runs == (starts ? ["a"] : []))
        #expect(out.loads == (starts ? [] : [["q"]]), "an old grant reads the queue again")
    }

    @Test func aBackendWithoutLeasesIsAskedToClaimNoNextHead() {
        var h = MachineHarness()
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        _ = h.send(.start(["q"]))
        let out = h.send(MachineHarness.loaded("q", [a, b]))
        #expect(out.runs == ["a"])
        #expect(out.nextHeads == [nil])
    }

    @Test func anUndecodableNextHeadIsNotClaimedWithTheOutcome() {
        var h = MachineHarness(claimsHeads: true)
        let a = h.entry("a", "q1")
        let b = h.entry("b", "q1", undecodable: true)
        let c = h.entry("c", "q2")
        _ = h.send(.start(["q1", "q2"]))
        _ = h.send(MachineHarness.loaded("q1", [a, b]), MachineHarness.loaded("q2", [c]))
        let out = h.send(.claimed([a.task, c.task], results: [.granted(), .granted()]))
        #expect(out.runs == ["a", "c"])
        #expect(out.nextHeads == [nil, nil], "an undecodable head is claimed on its own; q2 has no next head")
    }

    @Test func aNextHeadThatIsNoLongerTheHeadIsClaimedOnItsOwn() {
        var h = MachineHarness(claimsHeads: true)
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        _ = h.send(.start(["q"]))
        _ = h.send(MachineHarness.loaded("q", [a, b]))
        #expect(h.send(.claimed([a.task], results: [.granted()])).nextHeads == ["b"])
        // b is saved again while a runs: the finish claimed the old version.
        let newB = h.resaved(b)
        #expect(h.send(.changes([.saved(newB)])).isEmpty)
        let out = h.send(.continued(["q"]), .stored([.success(a, next: b)]))
        #expect(out.runs.isEmpty, "the version claimed is not the head any more")
        #expect(out.claims == [["b"]])
        #expect(h.send(.claimed([newB.task], results: [.granted()])).runEntries.map(\.task.revision) == [newB.task.revision])
    }

    @Test func aQueueWhoseNextHeadWasClaimedStillWaitsItsTurnAndItsClaimExpires() throws {
        var h = MachineHarness(maxConcurrentQueues: 1, claimsHeads: true)
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        let x = h.entry("x", "r")
        let y = h.entry("y", "r")
        _ = h.send(.start(["q", "r"]))
        #expect(h.send(MachineHarness.loaded("q", [a, b]), MachineHarness.loaded("r", [x, y])).claims == [["a"]])
        _ = h.send(.claimed([a.task], results: [.granted()]))
        // The slot goes to r, which waited in the line; q goes to the back with b claimed.
        let fair = h.send(.continued(["q"]), .stored([.success(a, next: b)]))
        #expect(fair.runs.isEmpty)
        #expect(fair.claims == [["x"]], "a long queue does not keep the slot because its next head was claimed")
        let expiry = try #require(fair.timers.first)
        #expect(h.send(.claimed([x.task], results: [.granted()])).runs == ["x"])
        // b's claim ages past its lifetime (its lease is not renewed while it waits): spent.
        #expect(h.send(.timerFired(expiry.token)).isEmpty)
        let turn = h.send(.stored([.success(x)]))
        #expect(turn.runs.isEmpty)
        #expect(turn.claims == [["b"]], "b is claimed again")
    }

    @Test func aQueueReadAgainClaimsItsHeadAgain() {
        var h = MachineHarness(maxConcurrentQueues: 1, claimsHeads: true)
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        let x = h.entry("x", "r")
        _ = h.send(.start(["q", "r"]))
        _ = h.send(MachineHarness.loaded("q", [a, b]), MachineHarness.loaded("r", [x]))
        _ = h.send(.claimed([a.task], results: [.granted()]))
        _ = h.send(.continued(["q"]), .stored([.success(a, next: b)]))
        _ = h.send(.claimed([x.task], results: [.granted()]))
        // Something changed that cannot be replayed: q is read again while it waits.
        #expect(h.send(.changes([.reload(["q"])])).loads == [["q"]])
        _ = h.send(MachineHarness.loaded("q", [b]))
        #expect(h.send(.stored([.success(x)])).claims == [["b"]])
    }

    @Test func aStoppingBrokerLetsGoOfTheLeasesItsFinishesKept() {
        var h = MachineHarness(claimsHeads: true)
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        _ = h.send(.start(["q"]))
        _ = h.send(MachineHarness.loaded("q", [a, b]))
        #expect(h.send(.claimed([a.task], results: [.granted()])).nextHeads == ["b"])
        _ = h.send(.shutdown)
        let out = h.send(.continued(["q"]), .stored([.success(a, next: b)]))
        #expect(out.runs.isEmpty)
        #expect(out.releases == [["q"]], "other workers need not wait for the lease")
        #expect(out.finishes)
    }

    @Test func aStoppingBrokerLetsGoOfTheLeasesKeptForHeadsWaitingInTheLine() {
        var h = MachineHarness(maxConcurrentQueues: 1, claimsHeads: true)
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        let x = h.entry("x", "r")
        _ = h.send(.start(["q", "r"]))
        _ = h.send(MachineHarness.loaded("q", [a, b]), MachineHarness.loaded("r", [x]))
        _ = h.send(.claimed([a.task], results: [.granted()]))
        // b's lease is kept while r has the one slot.
        #expect(h.send(.continued(["q"]), .stored([.success(a, next: b)])).claims == [["x"]])
        let stop = h.send(.shutdown)
        #expect(stop.releases == [["q"]], "b will not start here: its lease is let go at once")
        #expect(!stop.finishes, "x's claim is under way")
        #expect(h.send(.claimed([x.task], results: [.granted()])).releases == [["r"]], "nor will x")
    }

    /// A finish kept the lease, but no next head was recorded to start on it: the queue was being
    /// read when the outcome arrived. The lease is let go at shutdown all the same (it was kept
    /// until it expired, and other workers waited for it).
    @Test func aStoppingBrokerLetsGoOfALeaseKeptWhileItsQueueWasRead() {
        var h = MachineHarness(claimsHeads: true)
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        _ = h.send(.start(["q"]))
        _ = h.send(MachineHarness.loaded("q", [a, b]))
        #expect(h.send(.claimed([a.task], results: [.granted()])).nextHeads == ["b"])
        #expect(h.send(.changes([.reload(["q"])])).loads == [["q"]])
        let stored = h.send(.continued(["q"]), .stored([.success(a, next: b)]))
        #expect(stored.runs.isEmpty && stored.claims.isEmpty, "q is being read")
        #expect(h.send(.shutdown).releases == [["q"]])
    }

    /// The next head's claim was spent (it waited in the line past its lifetime): the lease the
    /// finish kept is still held, and let go at shutdown.
    @Test func aStoppingBrokerLetsGoOfALeaseKeptForAHeadWhoseClaimWasSpent() throws {
        var h = MachineHarness(maxConcurrentQueues: 1, claimsHeads: true)
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        let x = h.entry("x", "r")
        _ = h.send(.start(["q", "r"]))
        _ = h.send(MachineHarness.loaded("q", [a, b]), MachineHarness.loaded("r", [x]))
        _ = h.send(.claimed([a.task], results: [.granted()]))
        let fair = h.send(.continued(["q"]), .stored([.success(a, next: b)]))
        #expect(fair.claims == [["x"]])
        let expiry = try #require(fair.timers.first)
        _ = h.send(.claimed([x.task], results: [.granted()]))
        #expect(h.send(.timerFired(expiry.token)).isEmpty)
        #expect(h.send(.shutdown).releases == [["q"]], "r is in flight: its lease follows its outcome")
    }
}

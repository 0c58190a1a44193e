import Foundation
import Testing
@testable import TaskBrokerCore
@testable import TaskBrokerSQLite
import TaskBroker

/// A queue read only as far as the read-ahead (`truncated`): the machine keeps what it read, reads
/// the next actions after the last one once few are left to run (`readAhead`), leaves saves after
/// what it read to that read, and never brings back an action deleted while the read ran.
struct BrokerStateMachineReadAheadTests {
    @Test func aQueueReadInPartReadsOnBeforeItRunsOutAndKeepsItsOrder() {
        var h = MachineHarness()
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        let c = h.entry("c", "q")
        _ = h.send(.start(["q"]))
        let first = h.send(.loaded(["q": [a, b]], requested: ["q"], truncated: ["q"]))
        #expect(first.runs == ["a"])
        #expect(first.readAheads == ["q>\(b.task.position)"], "few actions left: read on after b")
        // Saved after what was read, while the read ahead runs (after its snapshot): applied once it
        // answers, if the answer reaches it. Saved within what was read (a moved action keeps its
        // old position): kept in order at once.
        let d = h.entry("d", "q")
        #expect(h.send(.changes([.saved(d)])).runs.isEmpty)
        let e = h.entry("e", "q", position: a.task.position)
        _ = h.send(.changes([.saved(e)]))
        let answered = h.send(.readAhead(["q": [c]], tokens: first.readAheadTokens))
        #expect(answered.loads.isEmpty && answered.readAheads.isEmpty, "read to its end: nothing more to read")
        var ran = ["a"]
        for entry in [a, e, b, c] {
            ran += h.send(.stored([.success(entry)])).runs
        }
        #expect(ran == ["a", "e", "b", "c", "d"])
        #expect(h.send(.stored([.success(d)])).loads.isEmpty)
        #expect(h.machine.queues["q"]?.isIdle == true)
    }

    /// An action deleted (or completed by another worker) while a read ahead runs is not brought
    /// back by the read's answer, which may predate the deletion.
    @Test func anActionDeletedWhileAReadAheadRunsIsNotBroughtBack() {
        var h = MachineHarness()
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        let c = h.entry("c", "q")
        _ = h.send(.start(["q"]))
        let first = h.send(.loaded(["q": [a]], requested: ["q"], truncated: ["q"]))
        #expect(first.runs == ["a"])
        _ = h.send(.changes([.deleted(b.task)]))
        _ = h.send(.readAhead(["q": [b, c]], tokens: first.readAheadTokens))
        #expect(h.send(.stored([.success(a)])).runs == ["c"])
    }

    /// A read of the whole read-ahead that starts while a read ahead runs supersedes it: the
    /// latter's answer is ignored.
    @Test func aReadAheadAnsweredAfterTheQueueIsReadAgainIsIgnored() {
        var h = MachineHarness(maxConcurrentQueues: 1)
        let p = h.entry("p", "busy")
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        _ = h.send(.start(["busy", "q"]))
        #expect(h.send(MachineHarness.loaded("busy", [p])).runs == ["p"])
        let first = h.send(.loaded(["q": [a]], requested: ["q"], truncated: ["q"]))
        #expect(first.readAheads == ["q>\(a.task.position)"])
        #expect(h.send(.changes([.reload(["q"])])).loads == [["q"]])
        _ = h.send(.readAhead(["q": [b]], tokens: first.readAheadTokens))
        let a2 = h.resaved(a)
        _ = h.send(MachineHarness.loaded("q", [a2]))
        #expect(h.send(.stored([.success(p)])).runs == ["a"])
        #expect(h.send(.stored([.success(a2)])).runs.isEmpty, "b came only with the ignored answer")
    }

    /// A read ahead that fails leaves the queue to run what it holds: the queue reads ahead again
    /// when it next starts an action, or reads again once it has run out.
    @Test func aFailedReadAheadIsTriedAgain() {
        var h = MachineHarness()
        let a = h.entry("a", "q")
        _ = h.send(.start(["q"]))
        let first = h.send(.loaded(["q": [a]], requested: ["q"], truncated: ["q"]))
        #expect(first.runs == ["a"])
        #expect(h.send(.readAheadFailed(first.readAheadTokens)).loads.isEmpty, "a still runs")
        let failed = h.send(.stored([.failure(a)]))
        #expect(failed.runs == ["a"], "a failed head stays first, retried at once")
        #expect(failed.readAheads == ["q>\(a.task.position)"], "and the queue reads ahead again")
        #expect(h.send(.readAheadFailed(failed.readAheadTokens)).loads.isEmpty)
        #expect(h.send(.stored([.success(a)])).loads == [["q"]], "run out: read again")
    }

    /// A queue read ahead to its end with nothing left is forgotten like any idle queue.
    @Test func aReadAheadThatFindsNothingLeavesTheQueueIdle() {
        var h = MachineHarness()
        let a = h.entry("a", "q")
        _ = h.send(.start(["q"]))
        let first = h.send(.loaded(["q": [a]], requested: ["q"], truncated: ["q"]))
        _ = h.send(.changes([.deleted(a.task)]))
        #expect(h.send(.readAhead([:], tokens: first.readAheadTokens)).loads.isEmpty)
        _ = h.send(.stored([.success(a)]))
        #expect(h.machine.queues["q"]?.isIdle == true)
    }
}

/// A broker started over more queues than its working set reads them a part at a time, as the
/// queues it holds run out, and still runs every one, in the order it learned of them.
struct BrokerStateMachineWorkingSetTests {
    @Test func queuesBeyondTheWorkingSetAreReadAsItsQueuesRunOut() {
        var h = MachineHarness(maxConcurrentQueues: 4)
        let workingSet = h.machine.configuration.workingSet
        let names = (0..<(3 * workingSet + 10)).map { "q\($0)" }
        var out = h.send(.start(names))
        var reads: [String] = []
        var ran: [String] = []
        var running: [BrokerEntry] = []
        var largestRead = 0
        while true {
            // Each queue read holds one action; each run succeeds.
            let loads = out.loads.flatMap { $0 }
            reads += loads
            largestRead = max(largestRead, loads.count)
            running += out.runEntries
            ran += out.runs
            #expect(h.machine.workingSetCount <= workingSet)
            #expect(h.machine.queues.count <= workingSet + 4 + h.machine.configuration.keepsIdleQueuesUpTo)
            if !loads.isEmpty {
                var inputs: [BrokerStateMachine.Input] = []
                for name in loads {
                    inputs.append(MachineHarness.loaded(name, [h.entry("a-\(name)", name)]))
                }
                out = h.machine.handle(inputs)
            } else if !running.isEmpty {
                out = h.send(.stored([.success(running.removeFirst())]))
            } else {
                break
            }
        }
        #expect(reads == names, "every queue is read once, in the order the broker learned of it")
        #expect(ran == names.map { "a-\($0)" })
        #expect(largestRead == workingSet, "the first read covers the working set, not every queue")
    }

    /// A change to a queue the broker does not hold, while queues learned of earlier wait unread,
    /// puts it behind them; with none waiting, it is read at once.
    @Test func aChangedQueueWaitsBehindTheUnreadOnesAndIsReadAtOnceWithoutThem() {
        var h = MachineHarness(maxConcurrentQueues: 1)
        let workingSet = h.machine.configuration.workingSet
        let names = (0..<(workingSet + 1)).map { "q\($0)" }
        let first = h.send(.start(names))
        #expect(first.loads.flatMap { $0 } == Array(names.prefix(workingSet)))
        #expect(h.send(.changes([.reload(["late"])])).loads.isEmpty, "behind q\(workingSet), which waits unread")
        #expect(h.machine.unread[h.machine.unreadHead...] == ["q\(workingSet)", "late"])

        var h2 = MachineHarness()
        _ = h2.send(.start(["a"]))
        #expect(h2.send(.changes([.reload(["late"])])).loads == [["late"]])
    }
}

/// A broker over more stored queues than one listing returns lists the rest a page at a time, as
/// its unread queues run low, and tries a failed listing again after the storage backoff.
struct BrokerStateMachineListingTests {
    @Test func storedQueuesAreListedAPageAtATimeAsTheUnreadOnesRunLow() {
        var h = MachineHarness(maxConcurrentQueues: 1)
        let first = h.send(.start(["a", "b"], listedThrough: "b"))
        #expect(first.loads == [["a", "b"]])
        #expect(first.listings == ["b"], "few queues wait unread: list on after b")
        let listed = h.send(.listed(["c", "d"], next: nil))
        #expect(listed.loads == [["c", "d"]])
        #expect(listed.listings.isEmpty, "every stored queue is listed")
    }

    @Test func aFailedListingIsTriedAgainAfterTheBackoff() {
        var h = MachineHarness()
        let first = h.send(.start([], listedThrough: "b"))
        #expect(first.listings == ["b"])
        let failed = h.send(.listFailed(message: "down"))
        #expect(failed.storageFailures == ["load  0.1 seconds"])
        #expect(failed.listings.isEmpty)
        let timer = failed.timers.map(\.token)
        #expect(timer.count == 1)
        #expect(h.send(.timerFired(timer[0])).listings == ["b"])
        let listed = h.send(.listed(["c"], next: nil))
        #expect(listed.loads == [["c"]])
        #expect(h.machine.failures[.load] == nil, "the backoff starts over")
    }
}

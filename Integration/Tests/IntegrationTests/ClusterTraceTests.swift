import Testing
@testable import QueuekitCLI

/// `demo-cluster`'s checks, fed traces with known faults: each check finds what it is for.
struct ClusterTraceTests {
    /// Worker 0 and worker 1 (killed at t=50) on queue q; times in nanoseconds.
    private static func trace(_ workers: [String]...) -> ClusterTrace {
        ClusterTrace(texts: workers.map { $0.joined(separator: "\n") })
    }

    @Test func aCleanTakeoverPassesEveryCheckAndIsTimedFromTheKill() {
        let trace = Self.trace(
            ["start q a 1 10", "end q a 1 uploaded 20", "start q c 1 2050", "end q c 1 uploaded 2060"],
            ["start q b 1 30", "end q b 1 uploaded 40", "start q c 1 45"]
        )
        #expect(trace.overlaps(kills: [1: 50]).isEmpty)
        #expect(trace.outOfOrder().isEmpty)
        #expect(trace.reRuns(kills: [1: 50]).total == 1)
        #expect(trace.reRuns(kills: [1: 50]).unexplained.isEmpty)
        let takeovers = trace.takeovers(killed: 1, at: 50)
        #expect(takeovers.map(\.queue) == ["q"])
        #expect(takeovers.map(\.seconds) == [2000 / 1e9])
        #expect(trace.handled(by: 0) == 2)
        #expect(trace.outcomes().uploaded == 3)
    }

    @Test func twoRunsOfOneQueueAtOnceAreAnOverlap() {
        let trace = Self.trace(
            ["start q a 1 10", "end q a 1 uploaded 30"],
            ["start q b 1 20", "end q b 1 uploaded 40"]
        )
        #expect(trace.overlaps(kills: [1: 100]) == ["q: b started on worker 2 while a ran on worker 1"])
        // b also started before a was done.
        #expect(trace.outOfOrder() == ["q: b started on worker 2 before an earlier action was done"])
    }

    @Test func anActionStartedBeforeItsPredecessorWasDoneIsOutOfOrder() {
        let trace = Self.trace(["start q b 1 10", "end q b 1 uploaded 20", "start q a 1 30", "end q a 1 uploaded 40"], [])
        #expect(trace.outOfOrder().count == 1)
        #expect(trace.overlaps(kills: [1: 100]).isEmpty)
    }

    @Test func aRetryIsNotDoneButItsNextAttemptMayFollow() {
        let trace = Self.trace([
            "start q a 1 10", "end q a 1 retry 20", "start q b 1 25", "end q b 1 uploaded 30",
            "start q a 2 40", "end q a 2 uploaded 50",
        ], [])
        #expect(trace.outOfOrder().count == 1)
        let inOrder = Self.trace(["start q a 1 10", "end q a 1 retry 20", "start q a 2 40", "end q a 2 uploaded 50", "start q b 1 60"], [])
        #expect(inOrder.outOfOrder().isEmpty)
        #expect(inOrder.outcomes().retries == 1)
    }

    @Test func aReRunNotCutShortByTheKillIsUnexplained() {
        // Worker 0 ran a twice; worker 1 (the one killed) had nothing to do with it.
        let trace = Self.trace(["start q a 1 10", "end q a 1 uploaded 20", "start q a 1 30", "end q a 1 uploaded 40"], [])
        #expect(trace.reRuns(kills: [1: 100]).total == 1)
        #expect(trace.reRuns(kills: [1: 100]).unexplained == ["a 1 ran again after a run on worker 1 that no kill cut short"])
        // The killed worker's run after the kill time cannot be a cut-short one either.
        let late = Self.trace(["start q a 1 200"], ["start q a 1 150"])
        #expect(late.reRuns(kills: [1: 100]).unexplained.count == 1)
    }

    @Test func aLineCutShortByTheKillIsSkipped() {
        let trace = Self.trace(["start q a 1 10", "end q a 1 uploaded 20"], ["start q b 1 30", "end q b 1 upl"])
        #expect(trace.lines.count == 3)
    }
}

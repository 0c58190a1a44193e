import Foundation
import Testing
@testable import QueuekitCLI

/// `queuekit soak`'s checks, fed known faults: each one finds what it is for.
struct SoakTests {
    @Test func runsCutShortByAnyOfSeveralKillsAreExplainedAndOthersAreNot() {
        // Lives 0 and 1 were killed (at 50 and 150) while running a; life 2 was not killed.
        let trace = ClusterTrace(texts: [
            "start q a 1 10",
            "start q a 1 60",
            ["start q a 1 160", "end q a 1 uploaded 170", "start q b 1 180", "end q b 1 uploaded 190", "start q b 1 200", "end q b 1 uploaded 210"]
                .joined(separator: "\n"),
        ])
        let kills: [Int: UInt64] = [0: 50, 1: 150]
        let reRuns = trace.reRuns(kills: kills)
        #expect(reRuns.total == 3)
        // a ran on lives 0 and 1, each killed while running it; b's first run, on life 2, was not cut short.
        #expect(reRuns.unexplained == ["b 1 ran again after a run on worker 3 that no kill cut short"])
        #expect(trace.overlaps(kills: kills).isEmpty)
        // Without the second kill, life 1's run of a is still running when life 2 starts it.
        #expect(trace.overlaps(kills: [0: 50]) == ["q: a started on worker 3 while a ran on worker 2"])
    }

    @Test func aDeadLetterWhoseEndLineTheKillCutOffCountsAsDoneAtItsLastStart() {
        // Life 0 dead-lettered a on its last attempt and was killed before it
        // wrote the end line; life 1 then ran b.
        let trace = ClusterTrace(texts: [
            ["start q a 1 10", "end q a 1 retry 20", "start q a 2 30"].joined(separator: "\n"),
            ["start q b 1 60", "end q b 1 uploaded 70"].joined(separator: "\n"),
        ])
        #expect(trace.outOfOrder() == ["q: b started on worker 2 before an earlier action was done"])
        #expect(trace.outOfOrder(deadLettered: ["a"]).isEmpty)
        // A dead letter is done only at its last start: b starting between a's attempts is out of order.
        let early = ClusterTrace(texts: [["start q a 1 10", "end q a 1 retry 20", "start q b 1 25", "start q a 2 30"].joined(separator: "\n")])
        #expect(early.outOfOrder(deadLettered: ["a"]).count == 1)
    }

    @Test func anUploadNeitherUploadedNorDeadLetteredIsLost() {
        let outcome = SoakOutcome(acknowledged: ["a", "b", "c"], uploaded: ["a"], deadLettered: ["b"], stillQueued: 0)
        #expect(outcome.lost == ["c"])
        #expect(!outcome.isClean)
        #expect(outcome.problems == ["1 lost: c"])
    }

    @Test func anUploadBothUploadedAndDeadLetteredOrNeverEnqueuedBreaksTheCheck() {
        let outcome = SoakOutcome(acknowledged: ["a", "b"], uploaded: ["a", "b", "x"], deadLettered: ["b"], stillQueued: 0)
        #expect(outcome.lost.isEmpty)
        #expect(outcome.duplicated == ["b"])
        #expect(outcome.phantom == ["x"])
        #expect(outcome.problems == ["1 both uploaded and dead-lettered: b", "1 done but never enqueued: x"])
    }

    @Test func anUploadStillQueuedAfterTheDrainBreaksTheCheck() {
        let done = SoakOutcome(acknowledged: ["a"], uploaded: ["a"], deadLettered: [], stillQueued: 0)
        #expect(done.isClean)
        var queued = done
        queued.stillQueued = 1
        #expect(!queued.isClean)
    }

    @Test func growthIsTheFittedSlopeOverTheWindowNotTheLastSample() throws {
        // 2 MB per second from t = 10 on, a 50 MB spike at t = 15, and warm-up growth before t = 10.
        let samples = (0..<40).map { index -> ResourceSample in
            let time = Double(index) * 0.5
            let rss = (time < 10 ? time * 8 : 80 + (time - 10) * 2) + (time == 15 ? 50 : 0)
            return ResourceSample(time: time, rssBytes: Int(rss * 1_048_576), fds: 20 + (time >= 10 ? 0 : index))
        }
        let growth = try #require(ResourceGrowth(samples, from: 10))
        #expect(growth.count == 20)
        #expect(growth.first.time == 10)
        // The spike pulls the fitted slope a little; a last-sample rule would see neither.
        #expect(abs(growth.rssMBPerMinute - 120) < 20)
        #expect(growth.fdsPerMinute == 0)
        let flat = try #require(ResourceGrowth(samples.map { ResourceSample(time: $0.time, rssBytes: 1 << 20, fds: 3) }, from: 0))
        #expect(flat.rssMBPerMinute == 0)
        #expect(ResourceGrowth(Array(samples.prefix(7)), from: 0) == nil)
    }

    @Test func theSampleOfALiveProcessIsReadFromProc() throws {
        #if os(Linux)
        let sample = try #require(ResourceSample.read(pid: getpid(), at: 1))
        #expect(sample.rssBytes > 1_000_000)
        #expect(sample.fds >= 3)
        #expect(ResourceSample.read(pid: Int32.max, at: 1) == nil)
        #endif
    }
}

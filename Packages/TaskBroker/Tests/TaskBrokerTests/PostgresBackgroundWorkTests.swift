// PostgreSQL only: not compiled in a build without TaskBrokerPostgres (the AddressSanitizer run).
#if canImport(TaskBrokerPostgres)
import Synchronization
@testable import TaskBrokerCore
@testable import TaskBrokerPostgres
import Testing

/// The PostgreSQL storage's background work (the change feed, lease releases nobody waits for)
/// runs as children of the task that runs its pools: stopping a job or ending that task cancels
/// the work, and nothing runs once it has ended.
@Suite(.timeLimit(.minutes(1)))
struct PostgresBackgroundWorkTests {
    /// Work that says when it started and when it was cancelled.
    private final class Probe: Sendable {
        let started: AsyncStream<Void>
        let cancelled: AsyncStream<Void>
        private let start: AsyncStream<Void>.Continuation
        private let cancel: AsyncStream<Void>.Continuation

        init() {
            (started, start) = AsyncStream.makeStream(of: Void.self)
            (cancelled, cancel) = AsyncStream.makeStream(of: Void.self)
        }

        /// Runs until cancelled.
        var work: BackgroundWork.Work {
            { [start, cancel] in
                start.yield()
                let (forever, keep) = AsyncStream.makeStream(of: Never.self)
                for await _ in forever {}
                _ = keep
                if Task.isCancelled { cancel.yield() }
            }
        }
    }

    private static func first(_ stream: AsyncStream<Void>) async -> Bool {
        for await _ in stream { return true }
        return false
    }

    @Test func aStoppedJobIsCancelledAndTheOthersGoOn() async {
        let background = BackgroundWork()
        let owner = Task { await withDiscardingTaskGroup { group in await background.drain(into: &group) } }
        let stopped = Probe()
        let kept = Probe()
        let job = background.start(stopped.work)
        #expect(job != nil)
        #expect(background.start(kept.work) != nil)
        #expect(await Self.first(stopped.started))
        #expect(await Self.first(kept.started))
        job?.stop()
        #expect(await Self.first(stopped.cancelled))
        // Work handed over with `run` runs too, beside the one still going.
        let ran = Latch()
        #expect(background.run { ran.open() })
        await ran.wait()
        owner.cancel()
        #expect(await Self.first(kept.cancelled), "ending the owner cancels the work it still runs")
        await owner.value
    }

    @Test func nothingRunsOnceTheOwnerHasEnded() async {
        let background = BackgroundWork()
        let owner = Task { await withDiscardingTaskGroup { group in await background.drain(into: &group) } }
        owner.cancel()
        await owner.value
        let ran = Mutex(false)
        #expect(!background.run { ran.withLock { $0 = true } })
        #expect(background.start { ran.withLock { $0 = true } } == nil)
        #expect(!ran.withLock { $0 })
    }
}

#endif

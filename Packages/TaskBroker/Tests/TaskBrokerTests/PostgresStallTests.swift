// PostgreSQL only: not compiled in a build without TaskBrokerPostgres (the AddressSanitizer run).
#if canImport(TaskBrokerPostgres)
#if canImport(Glibc)
import Glibc
#endif
import Foundation
import TaskBroker
import Testing

/// A worker process stalls (SIGSTOP: a paused VM, a machine that stops scheduling it) for two
/// leases while another worker runs: the other takes its queues over once their leases expire.
/// When the stalled worker wakes, its late outcomes are refused, and it starts nothing on a queue
/// the other now holds, not even a head it had claimed with a finish before the stall (that claim
/// is too old). Its runs that were in flight during the stall may overlap the taker's re-runs (the
/// README's failure model says so); nothing else overlaps, and nothing is lost.
@Suite(.timeLimit(.minutes(3)))
struct PostgresStallTests {
    @Test func aStalledWorkerLosesItsQueuesAndStartsNothingOnThemWhenItWakes() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open(leaseDuration: .seconds(2))
        // More queues than a worker runs at once (16): heads claimed with finishes wait in its line.
        let queues = 40
        // The workload is sized by the speed of the build: the workers must still have work when
        // the stalled one wakes (~500 actions a second in a debug build, ~60 under ThreadSanitizer),
        // and drain it within the time limit. 30 a queue to start with: the queues the worker holds
        // are not drained while the test measures its pace.
        var saved = 0
        func save(_ count: Int) async throws {
            try await database.save((saved..<saved + count).map { CrashAction(key: "k\($0)", queueName: "crash-q\($0 % queues)", index: $0) })
            saved += count
        }
        try await save(30 * queues)
        let directory = try TemporaryDirectory()
        let url = try PostgresTestServer.url()
        let stalled = try CrashHelperRun(arguments: ["pg-worker", url, store.schema, directory.path("stalled")])
        #expect(await stalled.line(after: 0) == "ready")
        // The worker's pace: its first 50 actions (it says each handler's start and return).
        let ends = await stalled.ends.values(count: 50)
        // As many more as two workers at this pace run in 6 s: the 4 s stall and a lease after it.
        let perSecond = Double(ends.count - 1) / max(Double((ends.max() ?? 0) - (ends.min() ?? 0)) / 1e9, 0.001)
        try await save(max(1, Int(perSecond * 2 * 6) / queues) * queues)
        // Stalled with actions in flight where it can be (the handler runs 2–10 ms of each round):
        // as it says the next action started (within 5 s).
        let started = stalled.starts.count
        _ = await arrives({ _ = await stalled.starts.values(count: started + 1) }, before: .now + .seconds(5))
        kill(stalled.process.processIdentifier, SIGSTOP)
        // The signal takes effect when the process is next scheduled, a few ms later on a busy
        // machine: the stall begins once the kernel reports it stopped.
        await stalled.waitUntilStopped()
        let stoppedAt = stallClock()
        let taker = try CrashHelperRun(arguments: ["pg-worker", url, store.schema, directory.path("taker")])
        #expect(await taker.line(after: 0) == "ready")
        // The stall itself, two leases long: the experiment's length, not a wait for an event.
        try await Task.sleep(for: .seconds(4))
        let drained = try await EmptyWatch(database)
        kill(stalled.process.processIdentifier, SIGCONT)
        let resumedAt = stallClock()
        // The workers drain the queues on their own.
        await drained.wait()
        await stalled.finish()
        await taker.finish()

        let before = PostgresCrashTests.stamps(inLog: directory.path("stalled"))
        let after = PostgresCrashTests.stamps(inLog: directory.path("taker"))
        let ended = Set((before + after).filter { $0.kind == .end }.map(\.key))
        #expect(ended == Set((0..<saved).map { "k\($0)" }), "every action ran to its end")
        let stalledRuns = Self.runs(before)
        let takerRuns = Self.runs(after)
        #expect(!takerRuns.isEmpty, "the taker ran actions")
        // In flight when the stall began: these may overlap the taker's re-runs.
        let inFlight = stalledRuns.filter { $0.start < stoppedAt && $0.end > stoppedAt }
        let takerRunsByQueue = Dictionary(grouping: takerRuns, by: \.queue)
        for run in stalledRuns where !inFlight.contains(where: { $0.key == run.key && $0.start == run.start }) {
            let overlapping = (takerRunsByQueue[run.queue] ?? []).filter { $0.start < run.end && run.start < $0.end }
            #expect(
                overlapping.isEmpty,
                "\(run.key) ran on the stalled worker from \(run.start - stoppedAt) to \(run.end == .max ? -1 : run.end - stoppedAt) ns after the stall began (it woke at \(resumedAt - stoppedAt)) while the taker ran \(overlapping.prefix(3).map { "\($0.key) from \($0.start - stoppedAt) to \($0.end - stoppedAt)" }) of its queue"
            )
        }
        let takeovers = Set(inFlight.map(\.queue)).compactMap { queue in
            takerRunsByQueue[queue]?.map(\.start).min().map { Double($0 - stoppedAt) / 1e9 }
        }.sorted()
        #expect(takeovers.count == Set(inFlight.map(\.queue)).count, "every queue in flight in the stall was taken over")
        print("stall (SIGSTOP for 4 s, lease 2 s, \(saved) actions, \(Int(perSecond)) a second before it): \(takeovers.count) queues in flight taken over after \(takeovers.first ?? 0)–\(takeovers.last ?? 0) s; \(stalledRuns.count { $0.start >= resumedAt }) runs on the stalled worker after it woke")
    }

    struct Run {
        var key: String
        var queue: Int
        var start: Int64
        var end: Int64
    }

    /// Each start with its end (a run still going at the end of the log ends at `Int64.max`).
    static func runs(_ stamps: [PostgresCrashTests.Stamp]) -> [Run] {
        var open: [String: Int64] = [:]
        var runs: [Run] = []
        func queue(_ key: String) -> Int { (Int(key.dropFirst()) ?? 0) % 40 }
        for stamp in stamps {
            switch stamp.kind {
            case .start: open[stamp.key] = stamp.time
            case .end:
                if let start = open.removeValue(forKey: stamp.key) {
                    runs.append(Run(key: stamp.key, queue: queue(stamp.key), start: start, end: stamp.time))
                }
            default: break
            }
        }
        runs += open.map { Run(key: $0.key, queue: queue($0.key), start: $0.value, end: .max) }
        return runs
    }
}

/// CLOCK_MONOTONIC in nanoseconds, the clock the workers stamp with.
private func stallClock() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}
#endif

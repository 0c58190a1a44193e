import QueueCore
import QueueCoreTesting
import Testing

/// `persistFirst(_:)` for a persister that has only the seed's four requirements (the
/// protocol's default), and `AnyJobPersister`'s forwarding of it.
@Suite(.timeLimit(.minutes(1)))
struct JobPersisterDefaultTests {
    @Test
    func theDefaultStoresWithPersistDurablyButNotFirst() throws {
        let seedShaped = SeedShapedPersister()
        let jobs = makeJobs(count: 2)
        try seedShaped.persist(jobs)
        let urgent = CuteJob(action: "urgent")
        var changed = jobs[1]
        changed.action = "changed"
        try seedShaped.persistFirst([urgent, changed])

        // The default is one `persist` call: a new job goes last, a stored one keeps its place.
        #expect(seedShaped.recording.calls == [.persist(jobs.map(\.id)), .persist([urgent.id, changed.id])])
        #expect(try seedShaped.load() == [jobs[0], changed, urgent])
    }

    @Test
    func theDefaultThrowsWhatPersistThrowsAndStoresNothing() {
        let seedShaped = SeedShapedPersister(RecordingPersister(jobs: makeJobs(count: 1), failing: true))
        #expect(throws: TestFailure(reason: "disk full")) {
            try seedShaped.persistFirst([CuteJob(action: "urgent")])
        }
        #expect(seedShaped.recording.jobs.map(\.action) == ["0"])
    }

    @Test
    func anyJobPersisterForwardsToThePersistersOwnPersistFirstOrToTheDefault() throws {
        let own = RecordingPersister(jobs: makeJobs(count: 1))
        try AnyJobPersister(own).persistFirst([CuteJob(action: "urgent")])
        #expect(own.calls == [.persistFirst([own.jobs[0].id])])
        #expect(own.jobs.map(\.action) == ["urgent", "0"])

        let seedShaped = SeedShapedPersister(RecordingPersister(jobs: makeJobs(count: 1)))
        // Wrapped twice: the eraser unwraps, and still reaches the default.
        try AnyJobPersister(AnyJobPersister(seedShaped)).persistFirst([CuteJob(action: "urgent")])
        #expect(seedShaped.recording.calls.count == 1)
        #expect(seedShaped.recording.jobs.map(\.action) == ["0", "urgent"])
    }

    /// The limitation the default documents: the queue puts the job first, but a restart on a
    /// persister without its own `persistFirst` loads it where `persist` stored it, last.
    @Test
    func aQueueOnASeedShapedPersisterLoadsARetriedJobLastAfterARestart() throws {
        let seedShaped = SeedShapedPersister()
        let queue = try JobQueue(handling: CuteJob.self, name: "seed-shaped", persister: seedShaped)
        let jobs = makeJobs(count: 2)
        queue.add(jobs)
        queue.retry(CuteJob(action: "urgent"))
        #expect(queue.peek()?.action == "urgent")
        #expect(queue.lastPersistenceError == nil)

        let restarted = try JobQueue(handling: CuteJob.self, name: "seed-shaped", persister: seedShaped)
        #expect(restarted.drain().map(\.action) == ["0", "1", "urgent"])
    }
}

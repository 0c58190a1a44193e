import AsyncPrimitivesTesting
import Dispatch
import Foundation
import QueueCore
import QueueCoreTesting
import Synchronization
import Testing

@Suite(.timeLimit(.minutes(1)))
struct JobQueueEnqueueTests {
    @Test
    func enqueueStoresTheJobsBeforeQueueingThem() throws {
        let persister = RecordingPersister()
        let queue = JobQueue(handling: CuteJob.self, name: "enqueue")
        queue.persister = AnyJobPersister(persister)
        let jobs = makeJobs(count: 3)
        try queue.enqueue(jobs)
        #expect(persister.storedIDs == jobs.map(\.id))
        #expect(queue.count == 3)
        #expect(queue.peek() == jobs[0])
    }

    @Test
    func enqueueThrowsAndQueuesNothingWhenTheJobsCannotBeStored() async throws {
        let persister = RecordingPersister(failing: true)
        let queue = JobQueue(handling: CuteJob.self, name: "enqueue-fails")
        queue.persister = AnyJobPersister(persister)
        let heard = EventCollector<JobQueueEvent>()
        let token = queue.observe { _, _, event in heard.record(event) }
        let error = #expect(throws: QueueError.self) {
            try queue.enqueue(makeJobs(count: 2))
        }
        #expect(error?.code == .persistenceFailed)
        #expect((error?.underlying as? TestFailure)?.reason == "disk full")
        #expect(queue.count == 0)
        // The async form says the same.
        let asyncError = await #expect(throws: QueueError.self) {
            try await queue.enqueue(makeJobs(count: 1))
        }
        #expect(asyncError?.code == .persistenceFailed)
        #expect(queue.count == 0)
        // `add` carries on as the seed's did, so this one is queued (and heard) in memory only.
        queue.add(makeJobs(count: 1, prefix: "add"))
        #expect(queue.count == 1)
        #expect(await heard.values(count: 1) == [.added])
        #expect(queue.lastPersistenceError != nil)
        withExtendedLifetime(token) {}
    }

    @Test
    func asyncEnqueueStoresThenQueues() async throws {
        let persister = RecordingPersister()
        let queue = JobQueue(handling: CuteJob.self, name: "enqueue-async")
        queue.persister = AnyJobPersister(persister)
        let jobs = makeJobs(count: 2)
        try await queue.enqueue(jobs)
        #expect(persister.storedIDs == jobs.map(\.id))
        #expect(queue.count == 2)
    }

    @Test
    func enqueueWithoutAPersisterQueuesInMemory() throws {
        let queue = JobQueue(handling: CuteJob.self, name: "enqueue-memory")
        try queue.enqueue(makeJobs(count: 2))
        try queue.enqueue([])
        #expect(queue.count == 2)
    }
}

@Suite(.timeLimit(.minutes(1)))
struct CooperativePoolTests {
    @Test
    func moreConcurrentAsyncCompletionsThanCoresEachDeleteWithoutBlockingThePool() async throws {
        // Every job finishes at the same moment on the cooperative pool (width: the core count),
        // and each delete blocks until all of them are in a delete at once. Run inline on the
        // pool, only `cores` deletes could ever be in progress: they would give up.
        let jobs = max(8, 2 * ProcessInfo.processInfo.activeProcessorCount + 2)
        let persister = BarrierPersister(expected: jobs)
        let barrier = AsyncBarrier(count: jobs)
        let queue = JobQueue(handling: CuteJob.self, name: "pool")
        queue.persister = AnyJobPersister(persister)
        queue.maxConcurrentJobs = jobs
        queue.processor = AnyJobProcessor { (_: CuteJob) async throws in
            await barrier.arrive()
        }
        let processed = EventCollector<String>()
        let token = queue.observe { _, done, event in
            if event == .processed { done.forEach { processed.record($0.action) } }
        }
        queue.add(makeJobs(count: jobs))
        queue.start()
        #expect(await processed.values(count: jobs).count == jobs)
        #expect(persister.timeouts == 0)
        withExtendedLifetime(token) {}
    }
}

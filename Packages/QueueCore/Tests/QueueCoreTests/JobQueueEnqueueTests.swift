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

/// A persister whose `delete` blocks its thread, as an `fsync` or a group-commit wait does,
/// until `expected` deletes are blocked in it at once. It gives up after `patience` so that a
/// test of code that can never get there fails instead of hanging.
final class BarrierPersister: JobPersister, Sendable {
    private let expected: Int
    private let patience: DispatchTimeInterval
    private let arrived = Mutex(0)
    private let gate = DispatchSemaphore(value: 0)
    private let gaveUp = Atomic(0)

    init(expected: Int, patience: DispatchTimeInterval = .seconds(3)) {
        self.expected = expected
        self.patience = patience
    }

    /// How many deletes gave up waiting for the others.
    var timeouts: Int { gaveUp.load(ordering: .relaxed) }

    func persist(_ jobs: [CuteJob]) throws {}

    func delete(_ job: CuteJob) throws {
        let count = arrived.withLock { arrived -> Int in
            arrived += 1
            return arrived
        }
        if count == expected {
            for _ in 1..<expected { gate.signal() }
        } else if count < expected, gate.wait(timeout: .now() + patience) == .timedOut {
            gaveUp.add(1, ordering: .relaxed)
        }
    }

    func load() throws -> [CuteJob] { [] }

    func clear(completion: (@Sendable ((any Error)?) -> Void)?) { completion?(nil) }
}

/// Resumes every waiter once `count` tasks have arrived; never blocks a thread.
final class AsyncBarrier: Sendable {
    private let count: Int
    private let waiting = Mutex<(arrived: Int, continuations: [CheckedContinuation<Void, Never>])>((0, []))

    init(count: Int) {
        self.count = count
    }

    func arrive() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let release = waiting.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.arrived += 1
                state.continuations.append(continuation)
                guard state.arrived >= count else { return [] }
                defer { state.continuations = [] }
                return state.continuations
            }
            release.forEach { $0.resume() }
        }
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

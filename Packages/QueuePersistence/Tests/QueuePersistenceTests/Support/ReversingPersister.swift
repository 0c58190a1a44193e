import QueueCore
import QueuePersistenceTesting
import Synchronization

/// A broken persister (loads newest first) that the conformance suite must reject.
final class ReversingPersister: JobPersister, Sendable {
    private let jobs = Mutex<[CompatTestJob]>([])

    func persist(_ jobs: [CompatTestJob]) throws {
        self.jobs.withLock { $0.append(contentsOf: jobs) }
    }

    func delete(_ job: CompatTestJob) throws {
        jobs.withLock { $0.removeAll { $0.id == job.id } }
    }

    func load() throws -> [CompatTestJob] {
        jobs.withLock { $0.reversed() }
    }

    func clear(completion: (@Sendable ((any Error)?) -> Void)?) {
        jobs.withLock { $0.removeAll() }
        completion?(nil)
    }
}

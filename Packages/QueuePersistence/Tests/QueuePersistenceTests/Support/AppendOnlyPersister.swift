import QueueCore
import QueuePersistenceTesting
import Synchronization

/// A correct persister of the seed's four requirements only: it keeps the protocol's default
/// `persistFirst`, which stores last, so the conformance suite's `persistFirst` checks must
/// reject it while its other checks pass.
final class AppendOnlyPersister: JobPersister, Sendable {
    private let jobs = Mutex<[CompatTestJob]>([])

    func persist(_ jobs: [CompatTestJob]) throws {
        self.jobs.withLock { stored in
            for job in jobs {
                if let index = stored.firstIndex(where: { $0.id == job.id }) {
                    stored[index] = job
                } else {
                    stored.append(job)
                }
            }
        }
    }

    func delete(_ job: CompatTestJob) throws {
        jobs.withLock { $0.removeAll { $0.id == job.id } }
    }

    func load() throws -> [CompatTestJob] {
        jobs.withLock { $0 }
    }

    func clear(completion: (@Sendable ((any Error)?) -> Void)?) {
        jobs.withLock { $0.removeAll() }
        completion?(nil)
    }
}

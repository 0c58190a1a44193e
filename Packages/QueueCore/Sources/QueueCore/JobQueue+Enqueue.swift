import Synchronization

// The throwing adds: jobs are queued only once they are stored.
extension JobQueue {
    /// Stores `jobs` with the persister, then appends them, in order, to the back of the
    /// queue; throws, queueing nothing, when they cannot be stored.
    ///
    /// This is the form that gives the crash guarantee: when it returns, every job is stored
    /// (with `FileBasedPersister` or `SQLiteJobPersister`, flushed to disk) and survives
    /// `kill -9` until it is processed, cancelled or given up. When it throws, none of the jobs
    /// is queued, no observer hears of them, and the persister has stored none of them (both
    /// QueuePersistence persisters store a batch all or nothing). Without a persister it
    /// queues the jobs in memory and never throws. Enqueueing an empty array does nothing.
    ///
    /// From `async` code, `try await queue.enqueue(jobs)` does the same without blocking a
    /// thread of Swift's cooperative pool while the persister writes.
    /// - Parameter jobs: The jobs to store and queue.
    /// - Throws: ``QueueError`` with code ``QueueError/Code/persistenceFailed`` when the
    ///   persister could not store the jobs; its error is the `underlying` one.
    public func enqueue(_ jobs: [Job]) throws {
        guard !jobs.isEmpty else { return }
        if let persister = core.withLock({ $0.persister }) {
            do {
                try persister.persist(jobs)
            } catch {
                throw enqueueFailed(jobs.count, error)
            }
        }
        append(jobs)
    }

    /// Stores `jobs` with the persister on threads of its own, then appends them, in order,
    /// to the back of the queue; throws, queueing nothing, when they cannot be stored.
    ///
    /// The `async` form of `enqueue(_:)`, with the same crash guarantee: the calling
    /// task is suspended, not blocked, while the persister writes and flushes.
    /// - Parameter jobs: The jobs to store and queue.
    /// - Throws: ``QueueError`` with code ``QueueError/Code/persistenceFailed`` when the
    ///   persister could not store the jobs; its error is the `underlying` one.
    public func enqueue(_ jobs: [Job]) async throws {
        guard !jobs.isEmpty else { return }
        if let persister = core.withLock({ $0.persister }) {
            do {
                try await BlockingIOPool.shared.run { try persister.persist(jobs) }
            } catch {
                throw enqueueFailed(jobs.count, error)
            }
        }
        append(jobs)
    }

    fileprivate func enqueueFailed(_ count: Int, _ error: any Error) -> QueueError {
        QueueError(
            code: .persistenceFailed,
            message: "Queue '\(name)' could not store \(count) job(s), so none was queued; check the persister's "
                + "storage (free space, permissions) and enqueue them again.",
            underlying: error
        )
    }
}

/// Stores a queue's jobs somewhere that outlives the process.
///
/// A ``JobQueue`` with a persister persists every added job before `add` returns, deletes a
/// job once it has been processed, cancelled, removed or given up by its retry strategy, and
/// loads every stored job, in the order it was added, when it is created with one.
///
/// Implementations are called from many threads and must be safe to share.
public protocol JobPersister<JobType>: Sendable {
    /// The kind of job this persister stores.
    associatedtype JobType: QueueJob

    /// Stores `jobs` durably, in order, after every job already stored.
    ///
    /// Storing a job whose `id` is already stored replaces it and keeps its place.
    /// - Throws: When the jobs could not be stored; none of them should then be counted on.
    func persist(_ jobs: [JobType]) throws

    /// Deletes the stored copy of `job`; deleting a job that is not stored does nothing.
    func delete(_ job: JobType) throws

    /// Returns every stored job in the order it was first persisted.
    func load() throws -> [JobType]

    /// Deletes every stored job, then calls `completion` with the error, if any.
    func clear(completion: (@Sendable ((any Error)?) -> Void)?)
}

extension JobPersister {
    /// Deletes every stored job.
    ///
    /// - Throws: The error the persister reported.
    public func clear() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            clear { error in
                if let error {
                    continuation.resume(throwing: error)
                } else {
                    continuation.resume()
                }
            }
        }
    }
}

/// A type-erased ``JobPersister``, so that a property can hold any persister of one job type.
///
/// ```swift
/// queue.persister = AnyJobPersister(FileBasedPersister(handling: CuteJob.self, queueName: name))
/// ```
public struct AnyJobPersister<JobType: QueueJob>: JobPersister {
    private let base: any JobPersister<JobType>

    /// Wraps `persister`.
    public init<P: JobPersister>(_ persister: P) where P.JobType == JobType {
        if let erased = persister as? AnyJobPersister<JobType> {
            self = erased
        } else {
            base = persister
        }
    }

    public func persist(_ jobs: [JobType]) throws {
        try base.persist(jobs)
    }

    public func delete(_ job: JobType) throws {
        try base.delete(job)
    }

    public func load() throws -> [JobType] {
        try base.load()
    }

    public func clear(completion: (@Sendable ((any Error)?) -> Void)?) {
        base.clear(completion: completion)
    }
}

/// Stores a queue's jobs somewhere that outlives the process.
///
/// A ``JobQueue`` with a persister persists every added job before `add` returns, stores a job
/// that ``JobQueue/retry(_:)`` puts at the front with ``persistFirst(_:)``, deletes a job once
/// it has been processed, cancelled, removed or given up by its retry strategy, and loads every
/// stored job, in queue order, when it is created with one.
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

    /// Stores `jobs` durably, in order, before every job already stored.
    ///
    /// When it returns, ``load()`` returns `jobs[0]`, then the rest of `jobs`, then the jobs
    /// stored before the call. ``JobQueue/retry(_:)`` calls it for a job it puts at the front
    /// of the queue, so that the job is still first after a restart.
    ///
    /// Storing a job whose `id` is already stored replaces it and **moves it to the front**
    /// (unlike ``persist(_:)``, which keeps its place). An `id` that appears more than once in
    /// `jobs` is stored once, at its first place, with its last value. Storing no job does
    /// nothing.
    ///
    /// The protocol's default calls ``persist(_:)``: durable, but not first (see the
    /// extension). Implement this requirement to keep the front across restarts.
    /// - Parameter jobs: The jobs to store first, in the order they are to run.
    /// - Throws: When the jobs could not be stored; none of them should then be counted on,
    ///   and a job that was stored before the call must still be stored, unchanged, in its
    ///   old place.
    func persistFirst(_ jobs: [JobType]) throws

    /// Deletes the stored copy of `job`; deleting a job that is not stored does nothing.
    func delete(_ job: JobType) throws

    /// Returns every stored job in stored order: the order ``persist(_:)`` appends in, with
    /// the jobs of each ``persistFirst(_:)`` call ahead of every job stored before that call.
    func load() throws -> [JobType]

    /// Deletes every stored job, then calls `completion` with the error, if any.
    func clear(completion: (@Sendable ((any Error)?) -> Void)?)
}

extension JobPersister {
    /// The default for a persister that implements only the seed's four requirements: stores
    /// `jobs` with ``persist(_:)``, durably, but **not first**.
    ///
    /// A new job is stored after every stored job, and a job whose `id` is already stored
    /// keeps its place, so after a restart ``load()`` does not return them first: a queue on
    /// such a persister puts a retried job first in memory, but loads it where `persist` put
    /// it. The default cannot do better safely: with only `persist`, `delete` and `load`, a
    /// job can be moved ahead of the others only by deleting and storing again every other
    /// job, and a crash in between would lose the jobs being moved. Implement
    /// ``persistFirst(_:)`` to keep the front across restarts (QueuePersistence's
    /// `FileBasedPersister` and `SQLiteJobPersister` do).
    /// - Parameter jobs: The jobs to store.
    /// - Throws: What ``persist(_:)`` throws.
    public func persistFirst(_ jobs: [JobType]) throws {
        try persist(jobs)
    }

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
    /// The wrapped persister, behind one reference. A queue copies its persister (an optional
    /// one) for every job it starts: copying an existential goes through value witnesses even
    /// when it is `nil`, copying a reference is one retain.
    private final class Box: Sendable {
        let base: any JobPersister<JobType>

        init(_ base: any JobPersister<JobType>) {
            self.base = base
        }
    }

    private let box: Box

    private var base: any JobPersister<JobType> { box.base }

    /// Wraps `persister`.
    public init<P: JobPersister>(_ persister: P) where P.JobType == JobType {
        if let erased = persister as? AnyJobPersister<JobType> {
            self = erased
        } else {
            box = Box(persister)
        }
    }

    public func persist(_ jobs: [JobType]) throws {
        try base.persist(jobs)
    }

    /// Calls the wrapped persister's ``JobPersister/persistFirst(_:)``: its own implementation
    /// when it has one, the protocol's default (``JobPersister/persist(_:)``) otherwise.
    /// - Parameter jobs: The jobs to store first, in order.
    /// - Throws: What the wrapped persister throws.
    public func persistFirst(_ jobs: [JobType]) throws {
        try base.persistFirst(jobs)
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

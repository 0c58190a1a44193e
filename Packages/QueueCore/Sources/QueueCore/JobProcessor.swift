/// Does the work a ``JobQueue``'s jobs stand for.
///
/// The seed's processor compiles unchanged:
///
/// ```swift
/// class UploadProcessor: JobProcessor {
///     typealias JobType = CuteJob
///     func processJob(_ job: CuteJob, completion: @escaping ((CuteJob, Error?) -> Void)) {
///         upload(job) { error in completion(job, error) }
///     }
/// }
/// ```
///
/// A processor need not be `Sendable`. A ``JobQueue`` calls ``processJob(_:completion:)`` from
/// its own serial executor only: two calls on one queue never overlap, and each call starts
/// after the previous one has returned. Whatever the processor does on other threads (a
/// network callback that calls `completion`, say) it must make safe itself, and a processor
/// that is not `Sendable` should not be shared by several queues.
public protocol JobProcessor<JobType>: AnyObject {
    /// The kind of job this processor handles.
    associatedtype JobType: QueueJob

    /// Processes `job`, then calls `completion` exactly once, from any thread.
    ///
    /// - Parameters:
    ///   - job: The job to process.
    ///   - completion: Call it with the job and `nil` when it succeeded, or with the job and
    ///     the error when it failed; the queue's retry strategy then decides what happens.
    func processJob(_ job: JobType, completion: @escaping @Sendable (JobType, (any Error)?) -> Void)
}

/// The `async` form of a processor: return when the job is done, throw when it failed.
///
/// ```swift
/// struct Uploader: AsyncJobProcessor {
///     func process(_ job: CuteJob) async throws { try await upload(job) }
/// }
/// queue.processor = AnyJobProcessor(Uploader())
/// ```
public protocol AsyncJobProcessor<JobType>: Sendable {
    /// The kind of job this processor handles.
    associatedtype JobType: QueueJob

    /// Processes `job`.
    ///
    /// - Parameter job: The job to process.
    /// - Throws: Any error: the job counts as failed and the queue's retry strategy decides
    ///   what happens to it.
    func process(_ job: JobType) async throws
}

/// A type-erased processor, so that ``JobQueue/processor`` can hold any processor of one job type.
///
/// ```swift
/// queue.processor = AnyJobProcessor(UploadProcessor())
/// queue.processor = AnyJobProcessor { job in try await upload(job) }
/// ```
// Safe to share although the wrapped processor may not be `Sendable`: this class has no
// mutable state of its own (only the `let` closure below), and the only thing it does with the
// processor is call `processJob`, which `JobQueue` does from its serial pump only, each call
// after the previous one returned (the hand-off goes through the queue's `Mutex`, which orders
// the memory). The processor's own cross-thread work (its `completion`, which is `@Sendable`)
// is its own business, exactly as in the seed; `AsyncJobProcessor`s are `Sendable` outright.
public final class AnyJobProcessor<JobType: QueueJob>: JobProcessor, @unchecked Sendable {
    private let body: (JobType, @escaping @Sendable (JobType, (any Error)?) -> Void) -> Void

    /// Wraps a completion-based processor.
    ///
    /// - Parameter processor: The processor; it is retained.
    public init<P: JobProcessor>(_ processor: P) where P.JobType == JobType {
        if let erased = processor as? AnyJobProcessor<JobType> {
            body = erased.body
        } else {
            body = { job, completion in processor.processJob(job, completion: completion) }
        }
    }

    /// Wraps an `async` processor.
    ///
    /// Each job runs in a task that starts on the queue's executor at once (no hop until the
    /// processor first suspends), so jobs start in queue order.
    /// - Parameter processor: The processor.
    public init<P: AsyncJobProcessor>(_ processor: P) where P.JobType == JobType {
        body = { job, completion in
            Self.run(job, completion: completion) { try await processor.process($0) }
        }
    }

    /// Wraps an `async` closure as a processor.
    ///
    /// - Parameter process: Called with each job; return when it is done, throw when it failed.
    public init(process: @escaping @Sendable (JobType) async throws -> Void) {
        body = { job, completion in
            Self.run(job, completion: completion, process)
        }
    }

    /// Hands `job` to the wrapped processor.
    ///
    /// - Parameters:
    ///   - job: The job to process.
    ///   - completion: Called exactly once with the job and the error, if any.
    public func processJob(_ job: JobType, completion: @escaping @Sendable (JobType, (any Error)?) -> Void) {
        body(job, completion)
    }

    private static func run(
        _ job: JobType,
        completion: @escaping @Sendable (JobType, (any Error)?) -> Void,
        _ process: @escaping @Sendable (JobType) async throws -> Void
    ) {
        let operation: @Sendable () async -> Void = {
            do {
                try await process(job)
                completion(job, nil)
            } catch {
                completion(job, error)
            }
        }
        if #available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *) {
            Task.immediate(operation: operation)
        } else {
            Task(operation: operation)
        }
    }
}

import Synchronization

/// What a ``PostgresTaskStorage`` runs besides its callers' operations (the change feed and its
/// heartbeat, lease releases that nobody waits for, the body of an operation given up on), as
/// children of the task that runs its connection pools: nothing it starts outlives it, and ending
/// the storage cancels all of it.
///
/// A job is handed to that task through a stream, which it drains into its task group
/// (``drain(into:)``); a job may be stopped on its own (``Job/stop()``).
final class BackgroundWork: Sendable {
    typealias Work = @Sendable () async -> Void

    private let jobs: AsyncStream<Work>
    private let submit: AsyncStream<Work>.Continuation

    init() {
        (jobs, submit) = AsyncStream.makeStream(of: Work.self)
    }

    /// A job started with ``start(_:)``.
    struct Job: Sendable {
        fileprivate let stopSignal: AsyncStream<Never>.Continuation

        /// Cancels the job's work (once it has started; before, it does not start).
        func stop() {
            stopSignal.finish()
        }
    }

    /// Runs `work` as a child of the storage's task.
    ///
    /// - Returns: `false` when the storage has ended: `work` does not run.
    @discardableResult
    func run(_ work: @escaping Work) -> Bool {
        if case .terminated = submit.yield(work) { return false }
        return true
    }

    /// Runs `work` as a child of the storage's task, until it returns or the job is stopped.
    ///
    /// - Returns: The job, or `nil` when the storage has ended: `work` does not run.
    func start(_ work: @escaping Work) -> Job? {
        let (stopped, stopSignal) = AsyncStream.makeStream(of: Never.self)
        let started = run {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await work() }
                // Ends when the job is stopped, or when the storage's task is cancelled.
                group.addTask { for await _ in stopped {} }
                await group.next()
                group.cancelAll()
            }
        }
        return started ? Job(stopSignal: stopSignal) : nil
    }

    /// Runs every job handed over in `group`, until the task that calls it is cancelled; a job
    /// handed over after that does not run.
    func drain(into group: inout DiscardingTaskGroup) async {
        for await work in jobs {
            group.addTask { await work() }
        }
        submit.finish()
    }
}

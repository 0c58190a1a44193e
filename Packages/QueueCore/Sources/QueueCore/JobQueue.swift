public import DequeModule
public import Dispatch
public import Logging
public import Synchronization

/// A first-in, first-out queue of typed jobs that persists them, hands them to a processor
/// one after another, retries the ones that fail as its strategy says, and tells observers
/// what happened.
///
/// ```swift
/// let queue = JobQueue(handling: CuteJob.self, name: "Uploads")
/// queue.processor = AnyJobProcessor(UploadProcessor())
/// queue.retryStrategy = MaxRetryStrategy(maxAttempts: 5)
/// let token = queue.observe { queue, jobs, event in print(event, jobs.map(\.id)) }
/// queue.add([CuteJob(data: payload, action: "create")])
/// queue.start()
/// ```
///
/// Every method is safe to call from any thread. The queue runs its processor calls,
/// retry-strategy calls and observer blocks on its own serial executor (never the main
/// queue), in event order; no lock is held while they run.
///
/// A job handed to the processor stays in the persister until it has been processed,
/// cancelled or purged by the retry strategy, so a crash re-delivers it (at least once).
public final class JobQueue<Job: QueueJob>: Sendable, CustomStringConvertible {
    /// The seed's spelling of ``JobQueueState``: `JobQueue.State.stopped`.
    public typealias State = JobQueueState

    /// The queue's name, as given to the initializer.
    public let name: String

    @usableFromInline let executor: DispatchQueue
    @usableFromInline let core: Mutex<Core>
    @usableFromInline let metrics: JobQueueMetrics

    /// Creates an empty, in-memory queue that is stopped and has no processor.
    ///
    /// - Parameters:
    ///   - handling: The type of job the queue holds.
    ///   - name: The queue's name; it labels the queue's executor and its log messages.
    public init(handling: Job.Type, name: String) {
        self.name = name
        self.executor = DispatchQueue(label: "QueueKit.JobQueue.\(name)")
        self.metrics = JobQueueMetrics(queueName: name)
        self.core = Mutex(Core(jobs: [], persister: nil, logger: Self.silentLogger))
    }

    /// Creates a stopped queue that persists its jobs with `persister` and starts with every
    /// job the persister has stored, in the order they were added.
    ///
    /// - Parameters:
    ///   - handling: The type of job the queue holds.
    ///   - name: The queue's name.
    ///   - persister: Where the jobs are stored; a plain persister or an ``AnyJobPersister``.
    /// - Throws: ``QueueError`` with code ``QueueError/Code/persistenceFailed`` when the
    ///   persister cannot load its jobs; the persister's error is the `underlying` one.
    public init(handling: Job.Type, name: String, persister: some JobPersister<Job>) throws {
        let erased = AnyJobPersister(persister)
        let loaded: [Job]
        do {
            loaded = try erased.load()
        } catch {
            throw QueueError(
                code: .persistenceFailed,
                message: "Queue '\(name)' could not load its stored jobs; check that the persister's storage is readable, or start without a persister.",
                underlying: error
            )
        }
        self.name = name
        self.executor = DispatchQueue(label: "QueueKit.JobQueue.\(name)")
        self.metrics = JobQueueMetrics(queueName: name)
        self.core = Mutex(Core(jobs: Deque(loaded), persister: erased, logger: Self.silentLogger))
    }

    deinit {
        let observers = core.withLock { $0.observers }.snapshot
        for observer in observers {
            observer.queueDidEnd?()
        }
    }

    // MARK: - Configuration

    /// The processor that ``start()`` feeds jobs to; `nil` (the default) processes nothing.
    public var processor: AnyJobProcessor<Job>? {
        get { core.withLock { $0.processor } }
        set { setAndWake { $0.processor = newValue } }
    }

    /// Where the queue stores its jobs; `nil` (the default) keeps them in memory only.
    ///
    /// Setting a persister does not store the jobs already queued, and does not load any:
    /// to load, create the queue with ``init(handling:name:persister:)``.
    public var persister: AnyJobPersister<Job>? {
        get { core.withLock { $0.persister } }
        set { core.withLock { $0.persister = newValue } }
    }

    /// What happens to a job that fails; `nil` (the default) drops it and deletes it from the persister.
    public var retryStrategy: (any JobRetryStrategy)? {
        get { core.withLock { $0.retryStrategy } }
        set { core.withLock { $0.retryStrategy = newValue } }
    }

    /// How many jobs may be with the processor at once; 1 (the default) processes serially.
    ///
    /// Jobs always start in queue order. Values below 1 are treated as 1. The processor's
    /// `processJob` is never called concurrently, even with more than one job in flight.
    public var maxConcurrentJobs: Int {
        get { core.withLock { $0.maxConcurrentJobs } }
        set { setAndWake { $0.maxConcurrentJobs = max(1, newValue) } }
    }

    /// The logger for persistence failures and dropped jobs; silent unless you set one.
    public var logger: Logger {
        get { core.withLock { $0.logger } }
        set { core.withLock { $0.logger = newValue } }
    }

    // MARK: - Inspection

    /// The number of jobs waiting in the queue (jobs with the processor are not counted).
    public var count: Int {
        core.withLock { $0.jobs.count }
    }

    /// Where the queue is in its life; a new queue is ``JobQueueState/stopped``.
    public var state: JobQueueState {
        core.withLock { $0.state }
    }

    /// The most recent error the persister reported, wrapped in a ``QueueError`` with code
    /// ``QueueError/Code/persistenceFailed``; `nil` if it never failed.
    ///
    /// A failing persister never breaks the in-memory queue: the job is queued, removed or
    /// processed anyway, the error is logged with ``logger`` and kept here.
    public var lastPersistenceError: QueueError? {
        core.withLock { $0.lastPersistenceError }
    }

    /// How many persister calls have failed since the queue was created.
    public var persistenceErrorCount: Int {
        core.withLock { $0.persistenceErrorCount }
    }

    /// How many times the job with `id` has failed on this queue since it was last added,
    /// counting the failure being handled; 0 once it is processed, purged or cancelled.
    ///
    /// - Parameter id: The job's ``QueueJob/id``.
    /// - Returns: The number of failures; retry strategies use it to give up.
    public func failureCount(ofJobWithID id: String) -> Int {
        core.withLock { $0.failureCounts[id] ?? 0 }
    }

    /// A short description: the name, the number of queued jobs and the state.
    public var description: String {
        let (count, state) = core.withLock { ($0.jobs.count, $0.state) }
        return "JobQueue(\(name), \(count) queued, \(state))"
    }

    // MARK: - Queue operations

    /// Appends `jobs`, in order, to the back of the queue.
    ///
    /// With a persister, the jobs are persisted before this returns; if that fails they are
    /// queued anyway and the error is logged and kept in ``lastPersistenceError``. Adding an
    /// empty array does nothing. Observers hear ``JobQueueEvent/added``.
    ///
    /// `add` never fails, so it cannot promise that the jobs survive a crash: when they must,
    /// use `enqueue(_:)` (or its `async` form), which throws instead of queueing jobs
    /// it could not store.
    /// - Parameter jobs: The jobs to add.
    @inlinable
    public func add(_ jobs: [Job]) {
        guard !jobs.isEmpty else { return }
        if let persister = core.withLock({ $0.persister }) {
            do {
                try persister.persist(jobs)
            } catch {
                persistenceFailed(error, "persist \(jobs.count) added job(s); they are queued in memory only")
            }
        }
        append(jobs)
    }

    /// Queues jobs that are stored (or need not be) and wakes the pump.
    @inlinable
    func append(_ jobs: [Job]) {
        metrics.didAdd(jobs.count)
        let wake = core.withLock { core -> Bool in
            core.jobs.append(contentsOf: jobs)
            core.record(.added, jobs)
            return core.claimPump()
        }
        if wake { schedulePump() }
    }

    /// Puts `job` at the front of the queue, so that it is the next one processed.
    ///
    /// Retry strategies call this from ``JobRetryStrategy/retry(job:failedOnQueue:)``; the
    /// failed job is then still stored and is not persisted again, unless another job was put
    /// first with `retry(_:)` while it was processed: it is then moved to the front of storage
    /// with ``JobPersister/persistFirst(_:)`` too, so that a restart keeps the order the queue
    /// has in memory. Any other job is first
    /// stored with the persister's ``JobPersister/persistFirst(_:)``, ahead of every stored
    /// job, so that it is still first after a restart (a job already stored is moved to the
    /// front). A persister that relies on the protocol's default `persistFirst` stores it
    /// with `persist` instead, last. If storing fails, the job is queued first anyway, in
    /// memory only, and the error is logged and kept in ``lastPersistenceError``; a copy
    /// stored before stays stored where it was. Observers hear ``JobQueueEvent/added``.
    /// - Parameter job: The job to put first.
    public func retry(_ job: Job) {
        let storing = core.withLock { core -> RetryStoring in
            if let index = core.inFlight.firstIndex(where: { $0.awaitingStrategy && !$0.requeued && $0.job.id == job.id }) {
                core.inFlight[index].requeued = true
                if core.inFlight[index].overtakenInStorage { return .moveToFront(core.persister) }
                core.jobs.prepend(job)
                core.record(.added, job)
                return .none
            }
            return .storeFirst(core.persister)
        }
        let persister: AnyJobPersister<Job>?
        switch storing {
        case .none:
            return
        case .moveToFront(let requeuedPersister):
            // Moved in storage first, then queued, as every job is: queued first, a `cancel` or
            // `drain` meanwhile deleted it, and the move then stored it again.
            do {
                try requeuedPersister?.persistFirst([job])
            } catch {
                persistenceFailed(
                    error,
                    "move job \(job.id), put back first by its retry strategy, to the front of storage; it is first "
                        + "in memory, but after a restart it runs after the jobs retried while it was processed"
                )
            }
            core.withLock { core in
                core.jobs.prepend(job)
                core.record(.added, job)
            }
            return
        case .storeFirst(let storePersister):
            persister = storePersister
        }
        if let persister {
            do {
                try persister.persistFirst([job])
            } catch {
                persistenceFailed(
                    error,
                    "store retried job \(job.id) at the front; it is queued first in memory only (a copy stored "
                        + "before keeps its old place)"
                )
            }
        }
        let wake = core.withLock { core -> Bool in
            core.jobs.prepend(job)
            core.record(.added, job)
            // The jobs being processed are now behind `job` in storage.
            for index in core.inFlight.indices {
                core.inFlight[index].overtakenInStorage = true
            }
            return core.claimPump()
        }
        if wake { schedulePump() }
    }

    /// Returns the job at the front of the queue without removing it.
    ///
    /// - Returns: The next job, or `nil` when the queue is empty.
    public func peek() -> Job? {
        core.withLock { $0.jobs.first }
    }

    /// Removes the job at the front of the queue and deletes it from the persister.
    ///
    /// Observers hear ``JobQueueEvent/removed``.
    /// - Returns: The removed job, or `nil` when the queue is empty.
    @discardableResult
    public func remove() -> Job? {
        let (job, persister, wake) = core.withLock { core -> (Job?, AnyJobPersister<Job>?, Bool) in
            guard let job = core.jobs.popFirst() else { return (nil, nil, false) }
            core.failureCounts[job.id] = nil
            core.record(.removed, job)
            return (job, core.persister, core.claimPump())
        }
        if let job { delete([job], from: persister, "delete removed job \(job.id)") }
        if wake { schedulePump() }
        return job
    }

    /// Removes the queued job with `id` and deletes it from the persister.
    ///
    /// A job that is already with the processor cannot be cancelled. Observers hear
    /// ``JobQueueEvent/cancelled``.
    /// - Parameter id: The job's ``QueueJob/id``.
    /// - Returns: The cancelled job, or `nil` when no queued job has that id.
    @discardableResult
    public func cancel(id: String) -> Job? {
        let (job, persister, wake) = core.withLock { core -> (Job?, AnyJobPersister<Job>?, Bool) in
            guard let index = core.jobs.firstIndex(where: { $0.id == id }) else { return (nil, nil, false) }
            let job = core.jobs.remove(at: index)
            core.failureCounts[job.id] = nil
            core.record(.cancelled, job)
            return (job, core.persister, core.claimPump())
        }
        if let job { delete([job], from: persister, "delete cancelled job \(job.id)") }
        if wake { schedulePump() }
        return job
    }

    /// The seed's spelling of ``cancel(id:)``: `queue.cancel(job.id)`.
    ///
    /// - Parameter id: The job's ``QueueJob/id``.
    /// - Returns: The cancelled job, or `nil` when no queued job has that id.
    @discardableResult
    public func cancel(_ id: String) -> Job? {
        cancel(id: id)
    }

    /// Removes every queued job and deletes each from the persister.
    ///
    /// Jobs already with the processor are not touched. Observers hear one
    /// ``JobQueueEvent/removed`` with all the drained jobs. A job whose delete fails stays stored
    /// (the others are still deleted); the failure, naming it, is logged and kept in
    /// ``lastPersistenceError``.
    /// - Returns: The drained jobs, in queue order.
    @discardableResult
    public func drain() -> [Job] {
        let (jobs, persister, wake) = core.withLock { core -> ([Job], AnyJobPersister<Job>?, Bool) in
            guard !core.jobs.isEmpty else { return ([], nil, false) }
            let jobs = Array(core.jobs)
            core.jobs.removeAll()
            for job in jobs where !core.failureCounts.isEmpty {
                core.failureCounts[job.id] = nil
            }
            core.record(.removed, jobs)
            return (jobs, core.persister, core.claimPump())
        }
        delete(jobs, from: persister, "delete \(jobs.count) drained job(s)")
        if wake { schedulePump() }
        return jobs
    }

    // MARK: - Flow control

    /// Starts handing queued jobs, and every job added later, to the ``processor``.
    ///
    /// Does nothing when the queue is already started. The state becomes
    /// ``JobQueueState/listening`` when there is nothing to do, ``JobQueueState/processing``
    /// while jobs are with the processor.
    @inlinable
    public func start() {
        let wake = core.withLock { $0.start() }
        if wake { schedulePump() }
    }

    /// Stops the queue on behalf of a retry strategy that will start it again later with
    /// ``restart(_:)``: the restart happens only if nobody called ``start()`` or ``stop()`` in
    /// between. A queue its owner stopped during a backoff stays stopped, and so does one stopped
    /// while the failed job ran: called from a strategy's `retry` on a queue stopped since that
    /// job started, the ticket never restarts it.
    ///
    /// ```swift
    /// let ticket = queue.stopForRetry()
    /// // … after the backoff:
    /// queue.restart(ticket)
    /// ```
    ///
    /// - Returns: The ticket that ``restart(_:)`` takes.
    public func stopForRetry() -> JobQueueRestartTicket {
        core.withLock { core in
            // Inside a failure's strategy (its job awaits it), on a queue no longer started: it
            // was stopped while the job ran, and that stop is the later word.
            let stoppedMeanwhile = !core.isStarted && core.inFlight.contains { $0.awaitingStrategy && !$0.requeued }
            core.stop()
            return JobQueueRestartTicket(generation: core.flowGeneration, restarts: !stoppedMeanwhile)
        }
    }

    /// Starts the queue again after ``stopForRetry()``, unless ``start()``, ``stop()`` or
    /// another ``stopForRetry()`` was called since: the owner's later call decides.
    ///
    /// - Parameter ticket: What ``stopForRetry()`` returned.
    /// - Returns: `true` if the queue was started, `false` if the ticket was outdated.
    @discardableResult
    public func restart(_ ticket: JobQueueRestartTicket) -> Bool {
        let (current, wake) = core.withLock { core -> (Bool, Bool) in
            guard ticket.restarts, core.flowGeneration == ticket.generation else { return (false, false) }
            return (true, core.start())
        }
        if wake { schedulePump() }
        if !current {
            logger.debug("\(name): not restarted by its retry strategy: start() or stop() was called during the wait")
        }
        return current
    }

    /// Stops handing out jobs; the rest stay queued.
    ///
    /// Jobs already with the processor finish: the state is ``JobQueueState/stopping`` until
    /// they have, then ``JobQueueState/stopped``.
    public func stop() {
        core.withLock { $0.stop() }
    }

    // MARK: - Observing

    /// Calls `block` for every event on this queue until the returned token is released.
    ///
    /// Blocks run on the queue's own executor, one at a time, in event order.
    /// - Parameter block: Called with the queue, the jobs concerned and the event.
    /// - Returns: A token that must be kept: releasing it (or calling
    ///   ``JobQueueNotificationToken/invalidate()``) stops delivery.
    public func observe(
        _ block: @escaping @Sendable (_ queue: JobQueue<Job>, _ jobs: [Job], _ event: JobQueueEvent) -> Void
    ) -> JobQueueNotificationToken<Job> {
        observe(JobQueueObserver(block: block, queueDidEnd: nil))
    }

    /// Every event on this queue from now on, as an `AsyncStream`.
    ///
    /// ```swift
    /// for await notification in queue.events where notification.event == .processed { … }
    /// ```
    /// Each access makes a new stream; it ends when the queue is deinitialized, and stops
    /// observing when the stream is dropped or its task is cancelled.
    public var events: AsyncStream<JobQueueNotification<Job>> {
        let (stream, continuation) = AsyncStream.makeStream(of: JobQueueNotification<Job>.self)
        let token = observe(
            JobQueueObserver(
                block: { _, jobs, event in continuation.yield(JobQueueNotification(event: event, jobs: jobs)) },
                queueDidEnd: { continuation.finish() }
            )
        )
        continuation.onTermination = { _ in token.invalidate() }
        return stream
    }

    @usableFromInline func observe(_ observer: JobQueueObserver<Job>) -> JobQueueNotificationToken<Job> {
        // The token holds the list of observers, not the queue: a weak reference to the queue
        // would move every retain and release of it, one per job, to the slow path.
        // Registered under the queue's lock, so that the observer hears exactly the events
        // recorded from now on, even those a pending delivery batch already holds.
        let (observers, id) = core.withLock { core -> (JobQueueObservers<Job>, UInt64) in
            observer.firstEvent.store(core.recordedEvents &+ 1, ordering: .relaxed)
            return (core.observers, core.observers.add(observer))
        }
        return JobQueueNotificationToken(observer: observer) {
            observers.remove(id: id)
        }
    }
}

extension JobQueue {
    /// What `retry(_:)` writes to storage.
    enum RetryStoring {
        /// A failed job its strategy puts back, still first in storage: nothing to write.
        case none
        /// A failed job its strategy puts back, which another job overtook in storage.
        case moveToFront(AnyJobPersister<Job>?)
        /// Any other job: store it first.
        case storeFirst(AnyJobPersister<Job>?)
    }
}

public import DequeModule
public import Logging

// MARK: - State

extension JobQueue {
    @usableFromInline struct InFlight: Sendable {
        @usableFromInline let ticket: UInt64
        @usableFromInline let job: Job
        @usableFromInline var failed = false
        /// The processor reported success and the job's stored copy is being deleted: a later
        /// call of the completion (a failure included) is ignored.
        @usableFromInline var succeeded = false
        @usableFromInline var awaitingStrategy = false
        @usableFromInline var requeued = false
        /// `retry(_:)` stored another job first while this one was processed: this job is no
        /// longer first in storage, so a requeue at the front must move it there too.
        @usableFromInline var overtakenInStorage = false

        @usableFromInline init(ticket: UInt64, job: Job) {
            self.ticket = ticket
            self.job = job
        }
    }

    @usableFromInline struct Failure {
        @usableFromInline let ticket: UInt64
        @usableFromInline let job: Job
        @usableFromInline let error: any Error

        @usableFromInline init(ticket: UInt64, job: Job, error: any Error) {
            self.ticket = ticket
            self.job = job
            self.error = error
        }
    }

    /// The events waiting for the observers, in order, kept apart by kind so that recording
    /// or delivering one copies no job and no enum that holds one: an event about one job
    /// (one per job and step of a burn-down) puts the job in `singles`, an event about
    /// several puts its array in `batches`, and `entries` says, event by event, which.
    @usableFromInline struct PendingEvents: Sendable {
        @usableFromInline struct Entry: Sendable {
            @usableFromInline let event: JobQueueEvent
            /// Whether the event's jobs are the next array of `batches` (else the next job of `singles`).
            @usableFromInline let isBatch: Bool

            @inlinable init(event: JobQueueEvent, isBatch: Bool) {
                self.event = event
                self.isBatch = isBatch
            }
        }

        @usableFromInline var entries: [Entry] = []
        @usableFromInline var singles: [Job] = []
        @usableFromInline var batches: [[Job]] = []

        @inlinable init() {}

        @inlinable var count: Int { entries.count }

        @inlinable var isEmpty: Bool { entries.isEmpty }

        @inlinable mutating func append(_ event: JobQueueEvent, _ jobs: [Job]) {
            entries.append(Entry(event: event, isBatch: true))
            batches.append(jobs)
        }

        @inlinable mutating func append(_ event: JobQueueEvent, _ job: consuming Job) {
            entries.append(Entry(event: event, isBatch: false))
            singles.append(job)
        }

        @inlinable mutating func removeAll() {
            entries.removeAll(keepingCapacity: true)
            singles.removeAll(keepingCapacity: true)
            batches.removeAll(keepingCapacity: true)
        }

        /// Calls `body` with each event's jobs, the event and its number (the first one's is
        /// `first`), in order. Every one-job event's job is swapped into one array (no copy),
        /// so that array is rewritten in place unless `body` kept it (then copy-on-write gives
        /// it a buffer of its own first); `singles` is left in an unspecified order.
        @inlinable mutating func forEach(numberedFrom first: UInt64, _ body: ([Job], JobQueueEvent, UInt64) -> Void) {
            var one: [Job] = []
            var single = 0
            var batch = 0
            var sequence = first
            for entry in entries {
                if entry.isBatch {
                    body(batches[batch], entry.event, sequence)
                    batch += 1
                } else {
                    if one.isEmpty {
                        one.append(singles[single])
                    } else {
                        swap(&one[0], &singles[single])
                    }
                    single += 1
                    body(one, entry.event, sequence)
                }
                sequence &+= 1
            }
        }

        /// Hands over every pending event and leaves room for as many again.
        @inlinable mutating func take() -> Self {
            var taken = Self()
            taken.entries.reserveCapacity(entries.count)
            taken.singles.reserveCapacity(singles.count)
            swap(&taken, &self)
            return taken
        }
    }

    @usableFromInline enum FinishOutcome: Sendable { case wake, done, unknown }

    @usableFromInline enum Step {
        case idle
        /// The events, the number of the first one, and the observers to tell.
        case deliver(PendingEvents, UInt64, [JobQueueObserver<Job>])
        case start(Job, UInt64, AnyJobProcessor<Job>, AnyJobPersister<Job>?)
        case failure(Failure, (any JobRetryStrategy)?, AnyJobPersister<Job>?, Logger)
    }

    @usableFromInline struct Core {
        @usableFromInline var jobs: Deque<Job>
        @usableFromInline var state: JobQueueState = .stopped
        /// Counts calls of `start()`, `stop()` and `stopForRetry()`: a retry strategy's restart
        /// applies only if none came after its stop.
        @usableFromInline var flowGeneration: UInt64 = 0
        @usableFromInline var processor: AnyJobProcessor<Job>?
        @usableFromInline var persister: AnyJobPersister<Job>?
        @usableFromInline var retryStrategy: (any JobRetryStrategy)?
        @usableFromInline var maxConcurrentJobs = 1
        @usableFromInline var logger: Logger
        @usableFromInline var inFlight: [InFlight] = []
        @usableFromInline var nextTicket: UInt64 = 0
        @usableFromInline var pumpScheduled = false
        @usableFromInline var failures: Deque<Failure> = []
        @usableFromInline var events = PendingEvents()
        @usableFromInline let observers = JobQueueObservers<Job>()
        /// How many events have been recorded for observers; the next one gets this plus one.
        @usableFromInline var recordedEvents: UInt64 = 0
        @usableFromInline var failureCounts: [String: Int] = [:]
        @usableFromInline var lastPersistenceError: QueueError?
        @usableFromInline var persistenceErrorCount = 0

        @usableFromInline init(jobs: Deque<Job>, persister: AnyJobPersister<Job>?, logger: Logger) {
            self.jobs = jobs
            self.persister = persister
            self.logger = logger
        }

        /// How many events the pump lets build up before it delivers them to the observers.
        @inlinable static var deliveryBatch: Int { 256 }

        @inlinable var isStarted: Bool {
            switch state {
            case .starting, .listening, .processing: true
            case .stopping, .stopped: false
            }
        }

        @inlinable var canStartJob: Bool {
            isStarted && processor != nil && !jobs.isEmpty && inFlight.count < maxConcurrentJobs
        }

        /// Queues an event for the observers, if there are any. Events are numbered from 1 in
        /// the order they are recorded: an observer hears only the events numbered from its
        /// `JobQueueObserver.firstEvent` on (those recorded after it was registered).
        @inlinable mutating func record(_ event: JobQueueEvent, _ jobs: [Job]) {
            if !observers.isEmpty {
                recordedEvents &+= 1
                events.append(event, jobs)
            }
        }

        /// Queues an event about one job for the observers, if there are any.
        @inlinable mutating func record(_ event: JobQueueEvent, _ job: consuming Job) {
            if !observers.isEmpty {
                recordedEvents &+= 1
                events.append(event, job)
            }
        }

        /// `start()` under the lock: a new flow call; begins handing out jobs.
        ///
        /// - Returns: Whether the caller must schedule the pump.
        @inlinable mutating func start() -> Bool {
            flowGeneration &+= 1
            switch state {
            case .stopped, .stopping:
                state = .starting
                normalize()
            case .starting, .listening, .processing:
                break
            }
            return claimPump()
        }

        /// `stop()` under the lock: a new flow call; stops handing out jobs.
        @usableFromInline mutating func stop() {
            flowGeneration &+= 1
            switch state {
            case .starting, .listening, .processing:
                state = processorHoldsAJob ? .stopping : .stopped
            case .stopping, .stopped:
                break
            }
        }

        /// Whether a job is still with the processor. A job whose failure is with the retry
        /// strategy is not: a strategy that stops the queue finds it stopped.
        @inlinable var processorHoldsAJob: Bool {
            inFlight.contains { !$0.awaitingStrategy }
        }

        /// Brings `state` in line with what is queued and in flight.
        @inlinable mutating func normalize() {
            switch state {
            case .starting, .listening, .processing:
                if !inFlight.isEmpty {
                    state = .processing
                } else if jobs.isEmpty || processor == nil {
                    state = .listening
                }
            case .stopping:
                if !processorHoldsAJob { state = .stopped }
            case .stopped:
                break
            }
        }

        /// Returns `true` when the caller must schedule the pump: there is work and no pump
        /// is scheduled or running.
        @inlinable mutating func claimPump() -> Bool {
            guard !pumpScheduled else { return false }
            if !failures.isEmpty || (!events.isEmpty && !observers.isEmpty) || canStartJob {
                pumpScheduled = true
                return true
            }
            return false
        }

        @inlinable mutating func nextStep() -> Step {
            if let failure = failures.popFirst() {
                failureCounts[failure.job.id, default: 0] += 1
                if retryStrategy != nil, let index = inFlight.firstIndex(where: { $0.ticket == failure.ticket }) {
                    inFlight[index].awaitingStrategy = true
                }
                record(.failedToProcess, failure.job)
                return .failure(failure, retryStrategy, persister, logger)
            }
            if !events.isEmpty && observers.isEmpty {
                events.removeAll()
            }
            // Observers hear of a drain pass in batches: jobs keep starting (a processor that
            // completes at once is driven in this loop) until a batch of events has built up
            // or nothing can start, and then the batch is delivered, in event order.
            if events.count < Self.deliveryBatch, canStartJob, let processor, let job = jobs.popFirst() {
                nextTicket &+= 1
                inFlight.append(InFlight(ticket: nextTicket, job: job))
                state = .processing
                record(.removed, job)
                return .start(job, nextTicket, processor, persister)
            }
            if !events.isEmpty {
                let first = recordedEvents &- UInt64(events.count) &+ 1
                return .deliver(events.take(), first, observers.snapshot)
            }
            normalize()
            pumpScheduled = false
            return .idle
        }
    }
}

// The pump's internals carry the processor's error (`any Error`), so they are not Sendable;
// they only ever live inside the queue's `Mutex` or on the pump's own stack.
@available(*, unavailable)
extension JobQueue.Failure: Sendable {}

@available(*, unavailable)
extension JobQueue.Step: Sendable {}

@available(*, unavailable)
extension JobQueue.Core: Sendable {}

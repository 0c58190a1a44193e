public import DequeModule
public import Logging

// MARK: - State

extension JobQueue {
    @usableFromInline struct InFlight: Sendable {
        @usableFromInline let ticket: UInt64
        @usableFromInline let job: Job
        @usableFromInline var failed = false
        @usableFromInline var awaitingStrategy = false
        @usableFromInline var requeued = false

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

    /// An event waiting for the observers. An event about one job (one per job and step of
    /// a burn-down) keeps the job inline: no array is made for it until it is delivered.
    @usableFromInline struct PendingEvent: Sendable {
        @usableFromInline enum Jobs: Sendable {
            case one(Job)
            case many([Job])
        }

        @usableFromInline let event: JobQueueEvent
        @usableFromInline let jobs: Jobs
        /// The event's number on its queue: an observer hears only the events numbered from
        /// its `JobQueueObserver.firstEvent` on (those recorded after it was registered).
        @usableFromInline let sequence: UInt64

        @inlinable init(event: JobQueueEvent, jobs: [Job], sequence: UInt64) {
            self.event = event
            self.jobs = .many(jobs)
            self.sequence = sequence
        }

        @inlinable init(event: JobQueueEvent, job: Job, sequence: UInt64) {
            self.event = event
            self.jobs = .one(job)
            self.sequence = sequence
        }
    }

    @usableFromInline enum FinishOutcome: Sendable { case wake, done, unknown }

    @usableFromInline enum Step {
        case idle
        case deliver([PendingEvent], [JobQueueObserver<Job>])
        case start(Job, UInt64, AnyJobProcessor<Job>, AnyJobPersister<Job>?)
        case failure(Failure, (any JobRetryStrategy)?, AnyJobPersister<Job>?, Logger)
    }

    @usableFromInline struct Core {
        @usableFromInline var jobs: Deque<Job>
        @usableFromInline var state: JobQueueState = .stopped
        @usableFromInline var processor: AnyJobProcessor<Job>?
        @usableFromInline var persister: AnyJobPersister<Job>?
        @usableFromInline var retryStrategy: (any JobRetryStrategy)?
        @usableFromInline var maxConcurrentJobs = 1
        @usableFromInline var logger: Logger
        @usableFromInline var inFlight: [InFlight] = []
        @usableFromInline var nextTicket: UInt64 = 0
        @usableFromInline var pumpScheduled = false
        @usableFromInline var failures: Deque<Failure> = []
        @usableFromInline var events: [PendingEvent] = []
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

        /// Queues an event for the observers, if there are any.
        @inlinable mutating func record(_ event: JobQueueEvent, _ jobs: [Job]) {
            if !observers.isEmpty {
                recordedEvents &+= 1
                events.append(PendingEvent(event: event, jobs: jobs, sequence: recordedEvents))
            }
        }

        /// Queues an event about one job for the observers, if there are any.
        @inlinable mutating func record(_ event: JobQueueEvent, _ job: Job) {
            if !observers.isEmpty {
                recordedEvents &+= 1
                events.append(PendingEvent(event: event, job: job, sequence: recordedEvents))
            }
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
                if inFlight.isEmpty { state = .stopped }
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
                events.removeAll(keepingCapacity: true)
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
                var pending: [PendingEvent] = []
                pending.reserveCapacity(events.count)
                swap(&pending, &events)
                return .deliver(pending, observers.snapshot)
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

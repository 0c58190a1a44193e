public import DequeModule
public import Dispatch
public import Logging
public import Synchronization

// The pump: how a queue hands jobs to its processor, records outcomes, runs its retry
// strategy and delivers events. Split from JobQueue.swift by concern; no behaviour here is new.
extension JobQueue {
    // MARK: - The pump

    /// Runs on `executor`, one at a time (the `pumpScheduled` flag), until there is nothing
    /// to do: handles failures, delivers events, starts jobs. Each step decides under the lock
    /// and acts outside it; a processor that completes synchronously is driven in this loop
    /// with no hop per job.
    @inlinable
    func pump() {
        while true {
            let step = core.withLock { core -> Step in core.nextStep() }
            // Consumed, so that the cases take its payload over: a delivery batch's arrays are
            // then uniquely held (swapping a job out of them copies nothing) and a step is
            // never copied as a whole (a copy of this generic enum went through its value
            // witnesses, once per job).
            switch consume step {
            case .idle:
                return
            case .deliver(var events, let first, let observers):
                deliver(&events, numberedFrom: first, to: observers)
            case .start(let job, let ticket, let processor, let persister):
                if let persister {
                    processor.processJob(job) { [self] _, error in
                        if error != nil {
                            finish(ticket: ticket, error: error)
                        } else if claimSuccess(ticket: ticket) {
                            didProcess(job, ticket: ticket, persister: persister)
                        } else {
                            // The job already failed (and may be queued again) or succeeded:
                            // deleting its stored copy now would lose it at the next restart.
                            ignoreExtraCompletion()
                        }
                    }
                } else {
                    processor.processJob(job) { [self] _, error in
                        finish(ticket: ticket, error: error)
                    }
                }
            case .failure(let failure, let strategy, let persister, let logger):
                handle(failure, strategy: strategy, persister: persister, logger: logger)
            }
        }
    }

    /// Tells `observers` of a batch of events, event by event, in order. Each observer hears
    /// an event only if it was recorded after the observer was registered, and nothing once
    /// its token is invalidated (checked before every event).
    @inlinable
    func deliver(_ events: inout PendingEvents, numberedFrom first: UInt64, to observers: [JobQueueObserver<Job>]) {
        if observers.count == 1 {
            // One observer (the seed's usage): its block and first event are read once per
            // batch, not retained and released around every call.
            let observer = observers[0]
            let block = observer.block
            let firstEvent = observer.firstEvent.load(ordering: .relaxed)
            events.forEach(numberedFrom: first) { jobs, event, sequence in
                if sequence >= firstEvent && observer.active.load(ordering: .acquiring) {
                    block(self, jobs, event)
                }
            }
        } else {
            events.forEach(numberedFrom: first) { jobs, event, sequence in
                for observer in observers
                where sequence >= observer.firstEvent.load(ordering: .relaxed)
                    && observer.active.load(ordering: .acquiring) {
                    observer.block(self, jobs, event)
                }
            }
        }
    }

    /// Marks the job of `ticket` as succeeded, before its stored copy is deleted: `false` when
    /// its completion was already called (it failed, or it succeeded and is being deleted).
    @usableFromInline
    func claimSuccess(ticket: UInt64) -> Bool {
        core.withLock { core -> Bool in
            guard let index = core.inFlight.firstIndex(where: { $0.ticket == ticket }),
                  !core.inFlight[index].failed, !core.inFlight[index].succeeded
            else { return false }
            core.inFlight[index].succeeded = true
            return true
        }
    }

    /// Deletes a processed job from the persister, then finishes it. The delete blocks (an
    /// `fsync`, a group-commit wait), so a completion called from a Swift task (an
    /// ``AsyncJobProcessor``'s, on the cooperative pool) hands it to threads of its own.
    @usableFromInline
    func didProcess(_ job: Job, ticket: UInt64, persister: AnyJobPersister<Job>) {
        if BlockingIOPool.callerIsInATask {
            BlockingIOPool.shared.submit { [self] in
                deleteProcessed(job, ticket: ticket, persister: persister)
            }
        } else {
            deleteProcessed(job, ticket: ticket, persister: persister)
        }
    }

    private func deleteProcessed(_ job: Job, ticket: UInt64, persister: AnyJobPersister<Job>) {
        do {
            try persister.delete(job)
        } catch {
            persistenceFailed(error, "delete processed job \(job.id); it may be processed again after a restart")
        }
        finish(ticket: ticket, error: nil)
    }

    /// Records the outcome of the job of `ticket`: the first call of its completion counts, a later
    /// one is ignored (and logged). A success that deletes a stored copy comes here after
    /// ``claimSuccess(ticket:)``, which a failure reported meanwhile does not undo.
    @inlinable
    func finish(ticket: UInt64, error: (any Error)?) {
        let outcome = core.withLock { core -> FinishOutcome in
            guard let index = core.inFlight.firstIndex(where: { $0.ticket == ticket }),
                  !core.inFlight[index].failed, error == nil || !core.inFlight[index].succeeded
            else { return .unknown }
            if let error {
                core.inFlight[index].failed = true
                core.failures.append(Failure(ticket: ticket, job: core.inFlight[index].job, error: error))
            } else {
                // Counted before the event is recorded, so that whoever hears `.processed` sees the count.
                metrics.didProcess()
                let job = core.inFlight.remove(at: index).job
                if !core.failureCounts.isEmpty {
                    core.failureCounts[job.id] = nil
                }
                core.record(.processed, job)
                core.normalize()
            }
            return core.claimPump() ? .wake : .done
        }
        switch outcome {
        case .wake:
            schedulePump()
        case .done:
            break
        case .unknown:
            ignoreExtraCompletion()
        }
    }

    @usableFromInline
    func ignoreExtraCompletion() {
        logger.warning(
            "A processor called its completion more than once; the extra call is ignored.",
            metadata: ["queue": "\(name)"]
        )
    }

    @usableFromInline func handle(
        _ failure: Failure,
        strategy: (any JobRetryStrategy)?,
        persister: AnyJobPersister<Job>?,
        logger: Logger
    ) {
        let job = failure.job
        metrics.didFail()
        if let strategy {
            strategy.retry(job: job, failedOnQueue: self)
        }
        let requeued = core.withLock { core -> Bool in
            guard let index = core.inFlight.firstIndex(where: { $0.ticket == failure.ticket }) else { return false }
            let entry = core.inFlight.remove(at: index)
            if !entry.requeued {
                core.failureCounts[job.id] = nil
            }
            core.normalize()
            return entry.requeued
        }
        if !requeued {
            metrics.didDrop()
            logger.warning(
                "Job failed and is dropped.",
                metadata: [
                    "queue": "\(name)", "job": "\(job.id)", "error": "\(failure.error)",
                    "reason": "\(strategy == nil ? "no retry strategy" : "the retry strategy gave it up")",
                ]
            )
            delete([job], from: persister, "delete failed job \(job.id) that was given up")
        }
    }

    // MARK: - Helpers

    @inlinable
    func schedulePump() {
        executor.async { self.pump() }
    }

    @usableFromInline func setAndWake(_ change: (inout Core) -> Void) {
        let wake = core.withLock { core -> Bool in
            change(&core)
            core.normalize()
            return core.claimPump()
        }
        if wake { schedulePump() }
    }

    /// Deletes each job from the persister. One that fails does not stop the others: each is
    /// tried, and the failure is reported once, naming the jobs still stored.
    @usableFromInline func delete(_ jobs: [Job], from persister: AnyJobPersister<Job>?, _ what: @autoclosure () -> String) {
        guard let persister else { return }
        var stillStored: [String] = []
        var lastError: (any Error)?
        for job in jobs {
            do {
                try persister.delete(job)
            } catch {
                stillStored.append(job.id)
                lastError = error
            }
        }
        guard let lastError else { return }
        let named = stillStored.prefix(10).joined(separator: ", ") + (stillStored.count > 10 ? ", …" : "")
        persistenceFailed(
            lastError,
            jobs.count == 1 ? what() : "\(what()): \(stillStored.count) of them still stored (\(named)), the others deleted"
        )
    }

    @usableFromInline func persistenceFailed(_ error: any Error, _ what: String) {
        let queueError = QueueError(
            code: .persistenceFailed,
            message: "Queue '\(name)' could not \(what). Check the persister's storage; the in-memory queue carries on.",
            underlying: error
        )
        let logger = core.withLock { core -> Logger in
            core.lastPersistenceError = queueError
            core.persistenceErrorCount += 1
            return core.logger
        }
        logger.error("\(queueError.message)", metadata: ["queue": "\(name)", "error": "\(error)"])
    }

    @usableFromInline static var silentLogger: Logger {
        Logger(label: "QueueKit.JobQueue", factory: { _ in SwiftLogNoOpLogHandler() })
    }
}

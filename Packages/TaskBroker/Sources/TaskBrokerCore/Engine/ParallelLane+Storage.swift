import Foundation
import Logging
import QueueRetry
import Synchronization
import Tracing

// The lane's round trips to storage: each posts what came of it to the lane's mailbox.
extension ParallelLane {
    /// Claims up to `limit` ready actions, in a span `TaskBroker claim` that links to the traces
    /// of the actions it claimed (as the queued lane's claim does).
    func claim(limit: Int) async {
        claimsSent.add(1, ordering: .relaxed)
        await withSpan("TaskBroker claim") { span in
            let sentAt = time.elapsed()
            do {
                let scope = try await scope()
                // A held batch where the backend has one free, else claims with leases written.
                let held = try await (storage as? any HeldParallelTaskStorage)?.claimParallelHeld(
                    scope, limit: limit, owner: owner, leaseDuration: leaseDuration, now: time.now()
                )
                let claims: [TaskParallelClaim]
                if let held {
                    claims = held.claims
                } else {
                    claims = try await storage.claimParallel(scope, limit: limit, owner: owner, leaseDuration: leaseDuration, now: time.now())
                }
                if span.isRecording {
                    span.attributes["taskbroker.count"] = claims.count
                    span.attributes["taskbroker.parallel"] = true
                    TraceCarrier.link(span, to: claims.map(\.task))
                }
                mailbox.post(.claimed(claims, asked: limit, sentAt: sentAt, held: held))
            } catch {
                span.recordError(error)
                mailbox.post(.claimFailed(Self.describe(error), asked: limit))
            }
        }
    }

    /// Stores a batch of outcomes, in a span `TaskBroker store outcomes` that links to the
    /// actions' traces.
    func store(_ outcomes: [TaskParallelOutcome]) async {
        await withSpan("TaskBroker store outcomes") { span in
            if span.isRecording {
                span.attributes["taskbroker.count"] = outcomes.count
                span.attributes["taskbroker.parallel"] = true
                TraceCarrier.link(span, to: outcomes.map(\.claim.task))
            }
            do {
                let refused = try await storage.finishParallel(outcomes, owner: owner)
                mailbox.post(.stored(outcomes, refused: refused))
            } catch {
                span.recordError(error)
                mailbox.post(.storeFailed(outcomes, Self.describe(error)))
            }
        }
    }

    /// Settles a held batch with its outcomes (its claims still running become ordinary claims),
    /// in a span `TaskBroker store outcomes` that links to the actions' traces.
    func settle(_ number: UInt64, _ batch: any TaskParallelHeldClaims, _ outcomes: [TaskParallelOutcome]) async {
        await withSpan("TaskBroker store outcomes") { span in
            if span.isRecording {
                span.attributes["taskbroker.count"] = outcomes.count
                span.attributes["taskbroker.parallel"] = true
                span.attributes["taskbroker.held"] = true
                TraceCarrier.link(span, to: outcomes.map(\.claim.task))
            }
            let settlement = await batch.settle(outcomes)
            if case .ended(let why) = settlement {
                // Nothing of it was stored; its actions are ready again for any worker.
                logger.warning("a held batch of \(batch.claims.count) parallel action(s) ended before it was settled (\(why)); its actions run again")
            }
            mailbox.post(.settled(number, outcomes, settlement))
        }
    }

    func findNextTime() async {
        do {
            mailbox.post(.nextTime(try await storage.nextParallelTime(try await scope(), owner: owner, now: time.now())))
        } catch {
            mailbox.post(.nextTimeFailed(Self.describe(error)))
        }
    }

    /// Makes the actions a handler held for a restart ready, now that a broker of their scope
    /// started (tried again after the backoff until it works or the lane stops), then wakes the lane.
    func releaseHeld() async {
        var failures = 0
        while true {
            do {
                try await storage.releaseHeldParallel(try await scope())
                break
            } catch {
                failures += 1
                let delay = backoff.delay(afterFailures: failures)
                logger.error("could not release the held parallel actions; tried again in \(delay): \(Self.describe(error))")
                if failures == 1 { mailbox.post(.wake(timer: nil)) }
                do {
                    try await time.sleep(delay)
                } catch {
                    return
                }
            }
        }
        mailbox.post(.wake(timer: nil))
    }

    /// Renews the claims of the actions in flight (every third of the lease while actions run: an
    /// idle lane sleeps on no clock).
    func renew(_ claims: [TaskParallelClaim]) async {
        defer { mailbox.post(.renewed) }
        do {
            let lost = try await storage.renewParallel(claims, owner: owner, leaseDuration: leaseDuration)
            if !lost.isEmpty { mailbox.post(.lost(lost)) }
        } catch {
            logger.warning("could not renew \(claims.count) parallel claim(s); tried again in a third of the lease: \(Self.describe(error))")
        }
    }
}

import Foundation
import Logging
import PostgresNIO
import Synchronization
public import TaskBrokerCore

// Storing outcomes: the finish function, the leases it keeps or releases, and what the feeds hear.
extension PostgresTaskStorage {
    /// Stores outcomes whose lease `owner` still holds and releases the leases (see `TaskStorage.finish(_:owner:)`).
    @discardableResult
    public func finish(_ outcomes: [TaskOutcome], owner: String) async throws -> TaskFinishReport {
        try await finish(outcomes, claimingNext: [:], owner: owner, leaseDuration: configuration.leaseDuration)
    }

    /// Stores outcomes whose lease `owner` still holds; releases the leases, except those of
    /// completed queues whose next head it claims in the same statement (see
    /// `TaskStorage.finish(_:claimingNext:owner:leaseDuration:)`).
    @discardableResult
    public func finish(
        _ outcomes: [TaskOutcome], claimingNext nextHeads: [String: StoredTask], owner: String, leaseDuration: Duration
    ) async throws -> TaskFinishReport {
        guard !outcomes.isEmpty else { return TaskFinishReport() }
        // Each outcome applies under the epoch of the lease its action ran under.
        let leases = outcomes.map(\.epoch)
        let lease = configuration.leaseDuration
        // One statement: the outcomes, the leases' release (or their renewal for the next heads it
        // claims) and the change notifications (a round trip each for the statement and the
        // notifications before), in a transaction of its own: stored once its COMMIT answers (see
        // `committed(_:)`).
        let count = outcomes.count
        // `outdatedAt`, per outcome, by position: storage held a newer state of its action.
        let (report, changes, outdatedAt) = try await runAgainIfAborted("store \(count) outcome(s)") {
            try await committed { [self] connection -> (TaskFinishReport, [TaskStorageChange], [Bool]) in
                // Per outcome, by position: the epoch of a lease kept for the next head.
                var kept = [Int64?](repeating: nil, count: count)
                var outdatedAt = [Bool](repeating: false, count: count)
                let rows = try await connection.query(
                    sql.finishQuery(
                        outcomes: outcomes, epochs: leases, nextHeads: nextHeads, owner: owner, origin: origin,
                        leaseMilliseconds: lease.milliseconds
                    ),
                    logger: logger
                )
                var held = [Bool](repeating: false, count: count)
                var applied = [Bool](repeating: false, count: count)
                var failedAny = false
                var failed = [Bool](repeating: false, count: count)
                for try await row in rows {
                    var cells = RowReader(row)
                    let positions: [Int64] = try cells.next()
                    let kinds: [Int16] = try cells.next()
                    let values: [Int64] = try cells.next()
                    guard kinds.count == positions.count, values.count == positions.count else {
                        throw TaskBrokerError(code: .storageFailed, message: "The finish statement returned arrays of different lengths.")
                    }
                    for (entry, position) in positions.enumerated() {
                        let index = Int(position) - 1
                        guard index >= 0, index < count else { continue }
                        switch kinds[entry] {
                        case PostgresSchema.FinishRow.held:
                            held[index] = true
                        case PostgresSchema.FinishRow.next:
                            held[index] = true
                            kept[index] = values[entry]
                        case PostgresSchema.FinishRow.done:
                            applied[index] = true
                        case PostgresSchema.FinishRow.failed:
                            applied[index] = true
                            failed[index] = true
                            failedAny = true
                        default: break
                        }
                    }
                }
                var report = TaskFinishReport()
                var completed: [StoredTask] = []
                var failedQueues: Set<String> = []
                for (index, outcome) in outcomes.enumerated() {
                    let task = outcome.task
                    guard held[index] else {
                        report.fenced.insert(task.queueName)
                        continue
                    }
                    guard applied[index] else {
                        report.outdated.insert(task.queueName)
                        kept[index] = nil
                        outdatedAt[index] = true
                        continue
                    }
                    if failed[index] {
                        failedQueues.insert(task.queueName)
                    } else {
                        // A next head counts as claimed only if the completion before it was applied (a
                        // completion outdated by a concurrent save keeps the lease until the broker
                        // claims the queue again, or it expires). Its queue stays held: like the
                        // statement's notifications, the feeds are not told of that completion.
                        if kept[index] != nil {
                            report.continued.insert(task.queueName)
                        } else {
                            completed.append(StoredTask(
                                key: task.key, collection: task.collection, queueName: task.queueName, payload: Data(), position: 0,
                                revision: task.revision
                            ))
                        }
                    }
                }
                // What the statement's notifications tell other storages' feeds, told to this one's
                // once committed.
                var changes: [TaskStorageChange] = []
                if failedAny { changes.append(.queuesChanged(failedQueues.sorted())) }
                if !completed.isEmpty { changes.append(.completed(completed)) }
                return (report, changes, outdatedAt)
            }
        }
        if !changes.isEmpty {
            for feed in localFeeds.withLock({ Array($0.feeds.values) }) {
                feed.yield(changes)
            }
        }
        // An outdated outcome (its action deleted or saved again while it ran) stored nothing, and
        // the statement let its lease go without a word, or kept it for a next head that no longer
        // follows. The broker reads the queue again and claims it anew; until then the lease is
        // let go and announced, so that no worker waits for it to expire (one kept here was not
        // released at shutdown either: the broker did not know of it). Under that outcome's epoch:
        // a claim made since holds a newer one, and is left alone.
        let outdated = outcomes.indices.compactMap { index -> TaskQueueLease? in
            outdatedAt[index] ? TaskQueueLease(queueName: outcomes[index].task.queueName, epoch: leases[index]) : nil
        }
        if !outdated.isEmpty {
            // In the background: the report does not wait for it (the batch's other queues wait
            // for their outcomes, and their kept leases for renewals that would wait behind it).
            background.run { [logger] in
                do {
                    try await self.releaseLeases(outdated, owner: owner)
                } catch {
                    // Nothing stored is at stake: those leases expire after one lease, as a dead worker's do.
                    logger.debug("could not let go of \(outdated.count) lease(s) of outdated outcomes: \(error)")
                }
            }
        }
        if !report.fenced.isEmpty {
            logger.warning("refused the outcomes of \(report.fenced.count) queue(s) whose lease \(owner) no longer holds: \(report.fenced.sorted().prefix(5).joined(separator: ", "))")
        }
        return report
    }
}

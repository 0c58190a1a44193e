import Foundation
import Synchronization

/// Stores the outcomes of finished actions: everything handed over while a commit runs goes into
/// the next one, in one transaction. It reports each commit to the engine's mailbox (`stored` or
/// `storeFailed`) and, once drained, `committerDrained`.
///
/// Handlers hand their outcomes straight to the committer, not through the engine: a queue's
/// next action starts only after its previous outcome is committed, so the path from a handler's
/// return to the commit is the broker's critical path.
protocol OutcomeCommitter: Sendable {
    /// Hands outcomes over.
    ///
    /// - Returns: `false` once the committer is drained: the outcomes were dropped (their actions
    ///   stay stored as they were and run again at the next start).
    @discardableResult
    func submit(_ outcomes: [BrokerOutcome]) -> Bool

    /// Accepts no more outcomes; stores those already handed over, then reports `committerDrained`
    /// and lets ``run()`` return.
    func drain()

    /// Stores outcomes until drained. The engine runs it as a child of its task group.
    func run() async
}

/// The committer of the embedded SQLite backend: a thread of its own that commits with GRDB's
/// blocking API. A commit then costs no executor hops (most of its latency on a busy machine),
/// and the blocking fsync never runs on Swift's cooperative pool.
final class SQLiteOutcomeCommitter: OutcomeCommitter {
    private let storage: SQLiteTaskStorage
    private let queue = BlockingQueue<BrokerOutcome>()
    private let mailbox: Mailbox<BrokerStateMachine.Input>

    init(storage: SQLiteTaskStorage, mailbox: Mailbox<BrokerStateMachine.Input>) {
        self.storage = storage
        self.mailbox = mailbox
    }

    func submit(_ outcomes: [BrokerOutcome]) -> Bool {
        queue.push(contentsOf: outcomes)
    }

    func drain() {
        queue.close()
    }

    /// Starts the thread and returns when it has ended: the thread is owned by the caller's task.
    func run() async {
        let ended = Latch()
        let queue = self.queue
        let storage = self.storage
        let mailbox = self.mailbox
        // The thread ends once `drain()` is called and what was queued is stored; `ended` joins it.
        Thread.detachNewThread {
            while let batch = queue.popAll() {
                do {
                    try storage.finishBlocking(batch.map(\.stored))
                    mailbox.post(.stored(batch))
                } catch {
                    mailbox.post(.storeFailed(batch, message: "\(error)"))
                }
            }
            mailbox.post(.committerDrained)
            ended.open()
        }
        await ended.wait()
    }
}

/// The committer of any other backend: a loop in a child task of the engine's task group.
final class AsyncOutcomeCommitter: OutcomeCommitter {
    private let storage: any TaskStorage
    private let owner: String
    private let leaseDuration: Duration
    private let inbox = Mailbox<BrokerOutcome>()
    private let mailbox: Mailbox<BrokerStateMachine.Input>

    init(storage: any TaskStorage, owner: String, leaseDuration: Duration, mailbox: Mailbox<BrokerStateMachine.Input>) {
        self.storage = storage
        self.owner = owner
        self.leaseDuration = leaseDuration
        self.mailbox = mailbox
    }

    func submit(_ outcomes: [BrokerOutcome]) -> Bool {
        inbox.post(contentsOf: outcomes)
    }

    func drain() {
        inbox.close()
    }

    /// Stores one batch and reports what became of it.
    private func store(_ batch: [BrokerOutcome]) async {
        do {
            // Each success also claims its queue's next head: one commit per action, not two.
            var nextHeads: [String: StoredTask] = [:]
            for outcome in batch {
                if let next = outcome.next { nextHeads[outcome.task.queueName] = next }
            }
            let report = try await storage.finish(
                batch.map(\.stored), claimingNext: nextHeads, owner: owner, leaseDuration: leaseDuration
            )
            var inputs: [BrokerStateMachine.Input] = []
            // Refused by the lease's fencing epoch: those queues were taken over.
            if !report.fenced.isEmpty { inputs.append(.leaseLost(report.fenced.sorted())) }
            // Deleted or replaced before the outcome arrived (the change is still on its way).
            if !report.outdated.isEmpty { inputs.append(.outdated(report.outdated.sorted())) }
            if !report.continued.isEmpty { inputs.append(.continued(Array(report.continued))) }
            inputs.append(.stored(batch))
            mailbox.post(contentsOf: inputs)
        } catch {
            mailbox.post(.storeFailed(batch, message: "\(error)"))
        }
    }

    /// One finish at a time: outcomes handed over while it runs go into the next (two finishes under
    /// way at once were measured no faster: the broker is bound by CPU, and batches got smaller).
    func run() async {
        while let batch = await inbox.next() {
            await store(batch)
        }
        mailbox.post(.committerDrained)
    }
}

import Foundation
import Tracing
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

/// The committer of a backend that stores outcomes with a blocking call (``BlockingOutcomeStore``:
/// the embedded SQLite backend): a thread of its own. A commit then costs no executor hops (most
/// of its latency on a busy machine), and the blocking fsync never runs on Swift's cooperative pool.
final class ThreadOutcomeCommitter: OutcomeCommitter {
    private let storage: any BlockingOutcomeStore
    private let queue = BlockingQueue<BrokerOutcome>()
    private let mailbox: Mailbox<BrokerStateMachine.Input>

    init(storage: any BlockingOutcomeStore, mailbox: Mailbox<BrokerStateMachine.Input>) {
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
                withSpan("TaskBroker store outcomes") { span in
                    span.attributes["taskbroker.count"] = batch.count
                    TraceCarrier.link(span, to: batch.map(\.task))
                    do {
                        let report = try storage.finishBlocking(batch.map(\.stored))
                        // Deleted or replaced (by another process) while it ran: nothing was stored.
                        if !report.outdated.isEmpty { mailbox.post(.outdated(report.outdated.sorted())) }
                        mailbox.post(.stored(batch))
                    } catch {
                        span.recordError(error)
                        mailbox.post(.storeFailed(batch, message: "\(error)"))
                    }
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
    /// The engine's elapsed time: when a finish is sent, the age of the next heads it claims.
    private let elapsed: @Sendable () -> Duration

    init(
        storage: any TaskStorage, owner: String, leaseDuration: Duration, mailbox: Mailbox<BrokerStateMachine.Input>,
        elapsed: @escaping @Sendable () -> Duration
    ) {
        self.elapsed = elapsed
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
        await withSpan("TaskBroker store outcomes") { span in
            span.attributes["taskbroker.count"] = batch.count
            TraceCarrier.link(span, to: batch.map(\.task))
            await store(batch, in: span)
        }
    }

    private func store(_ batch: [BrokerOutcome], in span: any Span) async {
        do {
            // Each success also claims its queue's next head: one commit per action, not two.
            var nextHeads: [String: StoredTask] = [:]
            for outcome in batch {
                if let next = outcome.next { nextHeads[outcome.task.queueName] = next }
            }
            let sentAt = elapsed()
            let report = try await storage.finish(
                batch.map(\.stored), claimingNext: nextHeads, owner: owner, leaseDuration: leaseDuration
            )
            var inputs: [BrokerStateMachine.Input] = []
            // Refused by the lease's fencing epoch: those queues were taken over.
            if !report.fenced.isEmpty { inputs.append(.leaseLost(report.fenced.sorted())) }
            // Deleted or replaced before the outcome arrived (the change is still on its way).
            if !report.outdated.isEmpty { inputs.append(.outdated(report.outdated.sorted())) }
            if !report.continued.isEmpty { inputs.append(.continued(Array(report.continued), sentAt: sentAt)) }
            inputs.append(.stored(batch))
            mailbox.post(contentsOf: inputs)
        } catch {
            span.recordError(error)
            mailbox.post(.storeFailed(batch, message: "\(error)"))
        }
    }

    /// Up to ``finishesInFlight`` finishes at once, each with everything handed over since the
    /// previous one started: a finish is a round trip to the database, during which the broker's
    /// own work (starting the next heads, running handlers) and a second finish on another
    /// connection go on. Outcomes of one queue are never in two finishes: a queue's next action
    /// starts only once its outcome is stored.
    ///
    /// Two, measured (burn-down benchmark, one worker process, 2-core machine, same session): one at
    /// a time 37,700–42,000 actions/s, two 47,100–51,000; three deadlocked with the lease renewal
    /// until every statement locked the queues' rows in name order, and was no faster after.
    static let finishesInFlight = 2

    func run() async {
        await withTaskGroup(of: Void.self) { group in
            var running = 0
            while true {
                if running == Self.finishesInFlight {
                    await group.next()
                    running -= 1
                }
                guard let batch = await inbox.next() else { break }
                group.addTask { await self.store(batch) }
                running += 1
            }
            await group.waitForAll()
        }
        mailbox.post(.committerDrained)
    }
}

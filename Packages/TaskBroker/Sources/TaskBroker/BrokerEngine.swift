import Foundation
import Logging
import Metrics
import Synchronization

/// Schedules a broker's queues. One driver task owns all scheduling state; handlers, timers
/// and database changes talk to it through a ``Mailbox``.
final class BrokerEngine<Handler: TaskQueueHandler>: BrokerEngineProtocol {
    typealias Action = Handler.Action
    typealias Finished = BrokerFinished
    typealias ActionID = BrokerActionID

    typealias Signal = BrokerSignal
    typealias Entry = BrokerEntry
    typealias QueueState = BrokerQueueState
    typealias Driver = BrokerDriver

    let name: String
    let owner: String
    let brokerID: UInt64
    let handler: Handler
    /// How an action is run: ``AsyncTaskQueueHandler/handle(_:context:)`` when the handler has
    /// the `async` form (decided once, not per action), else its callback bridged to `async`.
    let run: @Sendable (Handler.Action, TaskContext) async -> TaskResult
    let storage: any TaskStorage
    /// `storage` when it is the embedded backend (cast once, not per action).
    let sqlite: SQLiteTaskStorage?
    let registry: ClaimRegistry
    let configuration: TaskQueueBroker.Configuration
    let time: BrokerTime
    let claimFilter: @Sendable (String) -> Bool
    let mailbox = Mailbox<Signal>()
    let committer = Mailbox<Finished>()
    let committerQueue = BlockingQueue<Finished>()
    let events = EventBroadcaster()
    let finished = Latch()
    let inFlightView = Mutex<[String: String]>([:])
    let logger: Logger
    let handled: Counter
    let failed: Counter
    let retried: Counter
    let queueWait: Metrics.Timer
    let handleDuration: Metrics.Timer

    init(
        name: String, brokerID: UInt64, handler: Handler, storage: any TaskStorage, registry: ClaimRegistry,
        configuration: TaskQueueBroker.Configuration, time: BrokerTime,
        claimFilter: @escaping @Sendable (String) -> Bool
    ) {
        self.name = name
        self.owner = "\(name)#\(brokerID)"
        self.brokerID = brokerID
        self.handler = handler
        if let asyncHandler = handler as? any AsyncTaskQueueHandler<Handler.Action> {
            run = { action, context in await asyncHandler.handle(action, context: context) }
        } else {
            run = { action, _ in await handler.handleThroughCallback(action) }
        }
        self.storage = storage
        self.sqlite = storage as? SQLiteTaskStorage
        self.registry = registry
        self.configuration = configuration
        self.time = time
        self.claimFilter = claimFilter
        var logger = configuration.logger
        logger[metadataKey: "broker"] = "\(name)"
        self.logger = logger
        let dimensions = [("broker", name)]
        handled = Counter(label: "taskbroker_actions_handled", dimensions: dimensions)
        failed = Counter(label: "taskbroker_actions_failed", dimensions: dimensions)
        retried = Counter(label: "taskbroker_actions_retried", dimensions: dimensions)
        queueWait = Metrics.Timer(label: "taskbroker_queue_wait", dimensions: dimensions)
        handleDuration = Metrics.Timer(label: "taskbroker_handle_duration", dimensions: dimensions)
    }

    func accepts(_ queueName: String) -> Bool {
        claimFilter(queueName)
    }

    func stop(abandon: Bool) {
        mailbox.post(abandon ? .abandon : .stop)
    }

    func inFlight() -> [String: String] {
        inFlightView.withLock { $0 }
    }

    // MARK: - The driver


    /// Runs until the broker stops. Loads the stored queues first: stored actions start without
    /// any new write.
    ///
    /// The driver never waits for a commit: handlers hand their outcomes straight to a committer
    /// (a thread of its own for SQLite, a task otherwise) that stores everything that arrived
    /// while its previous commit ran in one transaction and reports back through the mailbox. A
    /// queue's next action starts only after its previous outcome is committed.
    func run(initialQueues: [String]) async {
        var driver = Driver()
        let committerTask: Task<Void, Never>?
        if let sqlite {
            // The embedded backend commits on a thread of its own with GRDB's blocking API: a
            // commit then costs no executor hops, which is most of its latency on a busy machine.
            committerTask = nil
            startCommitterThread(sqlite)
        } else {
            committerTask = Task { [committer, storage, owner, mailbox, logger] in
                while let batch = await committer.next() {
                    var succeeded = true
                    do {
                        try await storage.finish(batch.map(\.outcome), owner: owner)
                    } catch {
                        logger.error("could not store \(batch.count) outcome(s); their queues wait for restartQueues: \(error)")
                        succeeded = false
                    }
                    mailbox.post(.committed(batch, succeeded: succeeded))
                }
            }
        }
        defer { committerTask?.cancel() }
        startLoading(initialQueues, in: &driver)
        loop: while let signals = await mailbox.next() {
            for signal in signals {
                switch signal {
                case .changes(let batch):
                    await apply(batch, to: &driver)
                case .loaded(let queueName, let entries):
                    await loaded(queueName, entries: entries, in: &driver)
                case .committed(let batch, let succeeded):
                    committed(batch, succeeded: succeeded, in: &driver)
                case .timer(let queueName, let token):
                    fireTimer(queueName, token: token, in: &driver)
                case .stop:
                    driver.stopping = true
                case .abandon:
                    break loop
                }
            }
            if driver.stopping && driver.isIdle { break }
            await launchClaim(&driver)
        }
        mailbox.close()
        committer.close()
        committerQueue.close()
        for state in driver.queues.values {
            state.timer?.task.cancel()
        }
        inFlightView.withLock { $0 = [:] }
        logger.debug("broker stopped")
        events.yield(.stopped)
        events.finish()
        finished.open()
    }
}

// The driver's state, outside the generic engine: concrete types keep the hot paths free of
// generic metadata look-ups and value-witness calls.

enum BrokerSignal: Sendable {
    case changes([TaskChange])
    case committed([BrokerFinished], succeeded: Bool)
    case loaded(queueName: String, entries: [BrokerEntry]?)
    case timer(queueName: String, token: UInt64)
    case stop
    case abandon
}

struct BrokerEntry: Sendable {
    var task: StoredTask
    /// The decoded action, or `nil` when the payload does not decode as the handler's type.
    var action: (any BrokerActionBox)?
    var since: Duration
}

struct BrokerQueueState {
    /// Runnable actions in run order, from `head` on.
    var entries: [BrokerEntry] = []
    var head = 0
    /// The sticky head: an action that failed runs again before anything else.
    var held: BrokerEntry?
    var inFlight: StoredTask?
    var timer: (token: UInt64, task: Task<Void, Never>)?
    /// The newest revision the queue's load read: a save of this queue with a revision no newer
    /// was committed before that read, so the load already reflects it (or what replaced it).
    var loadedThrough: Int64 = 0

    var isEmpty: Bool { held == nil && head == entries.count }
    var count: Int { entries.count - head + (held == nil ? 0 : 1) }
}

/// Everything the driver task owns.
struct BrokerDriver {
    var queues: [String: BrokerQueueState] = [:]
    var ignored: Set<String> = []
    var ready: [String] = []
    var readySet: Set<String> = []
    /// Queues that have an action reserved, claimed, running or being committed.
    var running = 0
    var stopping = false
    /// Queues being read at startup, and those changed while they were read.
    var loading: Set<String> = []
    var dirtyWhileLoading: Set<String> = []

    var isIdle: Bool { running == 0 }
    var nextTimerToken: UInt64 = 0
    /// Which queue holds each action this broker knows of.
    var locations: [BrokerActionID: String] = [:]
    let decoder = JSONDecoder()
}

/// A decoded action, type-erased so that the driver's state is not generic.
protocol BrokerActionBox: AnyObject, Sendable {
    /// Orders two actions of one queue (`sort`); both boxes come from the same engine.
    func order(before other: any BrokerActionBox) -> ComparisonResult
}

/// The box of an action of type `Action`.
final class TypedActionBox<Action: TaskQueueAction>: BrokerActionBox {
    let value: Action

    init(_ value: Action) {
        self.value = value
    }

    func order(before other: any BrokerActionBox) -> ComparisonResult {
        guard let other = other as? TypedActionBox<Action> else { return .orderedSame }
        return value.sort(other.value)
    }
}

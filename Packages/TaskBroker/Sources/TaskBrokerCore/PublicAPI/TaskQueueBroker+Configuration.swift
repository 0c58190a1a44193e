public import Foundation
public import Logging
public import Metrics
public import QueueRetry

extension TaskQueueBroker {
    /// Tunables of a broker; every field has a default.
    public struct Configuration: Sendable {
        /// How many queues run an action at the same time. Queues wait for a slot in turn, so a
        /// long queue does not starve the others. Defaults to 16.
        public var maxConcurrentQueues: Int
        /// How long ``shutdown()`` waits for running handlers before it cancels them. Defaults to 30 s.
        public var shutdownTimeout: Duration
        /// How long a claim on a queue lasts on a backend shared by several processes, unless the
        /// backend sets its own (TaskBrokerPostgres does: `PostgresConfiguration.leaseDuration`).
        /// The broker renews the leases of its running actions every third of it. Defaults to 60 s.
        public var leaseDuration: Duration
        /// Where the broker logs; silent by default.
        public var logger: Logger
        /// Reads the wall clock once, when the broker starts, to relate stored retry dates to the
        /// injected clock. Inject a fixed date in tests.
        public var wallClock: @Sendable () -> Date
        /// Whether `setup` starts the broker (the default). With `false`, `setup` claims the queues
        /// and listens for saves but runs nothing until ``TaskQueueBroker/start()``: subscribe to
        /// ``TaskQueueBroker/events`` in between to receive every event from the first one.
        public var startsAutomatically: Bool
        /// How long the broker waits before it tries a failed storage operation again (reading a
        /// queue, claiming a head, storing an outcome): doubling from 50 ms up to 5 s by default.
        /// The queues concerned keep their place and wait; nothing needs a restart.
        public var storageRetryBackoff: Backoff
        /// How many stored actions of a queue the broker reads at a time and keeps in memory: once
        /// half of them or fewer are left to run, it reads the next ones; the rest of the queue
        /// stays in the database. At least 1; defaults to 64. A queue whose action type has its
        /// own `sort(_:)` is read whole instead.
        public var readAhead = 64
        /// How many times an action may fail before it moves to the dead letters (in the same
        /// transaction that stores its last failure) and its queue goes on with its next action;
        /// values below 1 count as 1. `nil` (the default): an action is retried as its handler
        /// says, for ever, as the seed does. Dead letters never run until replayed
        /// (``TaskDatabase/replayDeadLetter(key:collection:)``).
        public var maxAttempts: Int?
        /// How long a handler may run: a run still going after it is cancelled (an
        /// ``AsyncTaskQueueHandler`` sees `Task.isCancelled`) and counts as a failed attempt, retried
        /// after ``retryBackoff`` (so ``maxAttempts`` applies). A callback-form handler that never
        /// calls its completion cannot be cancelled: the broker stops waiting for it, and its late
        /// completion changes nothing. `nil` (the default): no limit. Durations below a nanosecond
        /// count as a nanosecond.
        public var actionTimeout: Duration?
        /// How long a run that timed out waits before it is retried, by attempt. Defaults to 1 s
        /// doubling to 5 minutes.
        public var retryBackoff = Backoff(initial: .seconds(1), maximum: .seconds(300))
        /// Limits on how many actions start per period, by queue-name prefix, counted in the
        /// database and shared by every broker (in every process) that has the same limit. A
        /// queue is governed by the limit with the longest prefix it has; queues no limit covers
        /// are not held back. Empty by default. Two limits with one prefix are refused by `setup`.
        public var rateLimits: [TaskRateLimit] = []
        /// How many plain parallel actions (`TaskDatabase.saveParallel(_:notBefore:priority:)`)
        /// the broker runs at the same time, beside its queues. It claims ready ones in batches up
        /// to its free slots. 0 runs none (a broker that only serves queues); negative counts as 0.
        /// Defaults to 16.
        public var maxConcurrentParallelActions = 16
        /// The swift-metrics backend the broker records its counters, timers and
        /// `taskbroker_actions_running` into. Defaults to the one `MetricsSystem` was bootstrapped
        /// with (none: nothing is recorded).
        public var metricsFactory: any MetricsFactory = MetricsSystem.factory

        /// Creates a configuration.
        ///
        /// - Parameters:
        ///   - maxConcurrentQueues: How many queues run at once; at least 1.
        ///   - shutdownTimeout: How long ``shutdown()`` waits for running handlers.
        ///   - leaseDuration: How long a queue claim lasts on a shared backend.
        ///   - logger: Where the broker logs.
        ///   - wallClock: The wall clock, read once at start.
        ///   - startsAutomatically: Whether `setup` starts the broker; `false` waits for ``TaskQueueBroker/start()``.
        ///   - storageRetryBackoff: The delay before a failed storage operation is tried again.
        public init(
            maxConcurrentQueues: Int = 16,
            shutdownTimeout: Duration = .seconds(30),
            leaseDuration: Duration = .seconds(60),
            logger: Logger = Logger(label: "TaskBroker", factory: { _ in SwiftLogNoOpLogHandler() }),
            wallClock: @escaping @Sendable () -> Date = { Date() },
            startsAutomatically: Bool = true,
            storageRetryBackoff: Backoff = Backoff(initial: .milliseconds(50), maximum: .seconds(5))
        ) {
            self.maxConcurrentQueues = max(1, maxConcurrentQueues)
            self.shutdownTimeout = max(.zero, shutdownTimeout)
            self.leaseDuration = leaseDuration
            self.logger = logger
            self.wallClock = wallClock
            self.startsAutomatically = startsAutomatically
            self.storageRetryBackoff = storageRetryBackoff
        }
    }
}

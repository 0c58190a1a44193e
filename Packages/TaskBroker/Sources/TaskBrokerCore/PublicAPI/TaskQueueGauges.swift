public import Foundation
public import Metrics
import Synchronization

/// Gauges of a database's queues, grouped by name prefix, for a swift-metrics backend
/// (Prometheus, StatsD…): what operators page on. Each ``update(now:)`` reads
/// ``TaskDatabase/snapshot()`` and records, per prefix (`uploads` for `uploads-alice`):
///
/// | gauge | value |
/// |---|---|
/// | `taskbroker_queue_depth` | pending actions of the prefix's queues |
/// | `taskbroker_queue_parallel_depth` | their plain parallel actions not yet done |
/// | `taskbroker_queue_oldest_age_seconds` | how long the longest-waiting pending action has waited |
/// | `taskbroker_queue_dead_letters` | dead letters |
/// | `taskbroker_queues` | queues with stored actions |
/// | `taskbroker_queues_paused` | queues paused by an operator or by a failure |
///
/// A prefix whose queues are all gone reads 0. Call ``update(now:)`` when the metrics are scraped
/// (`queuekit serve` and `queuekit work --metrics` do, for `GET /metrics`), or on a timer. The
/// brokers' own counters, timers and `taskbroker_actions_running` are recorded as they work.
public final class TaskQueueGauges: Sendable {
    private let database: TaskDatabase
    private let prefix: @Sendable (String) -> String
    private let factory: any MetricsFactory
    /// The prefixes recorded last time, so that one whose queues are gone reads 0.
    private let recorded = Mutex<Set<String>>([])

    /// Creates the gauges of `database`'s queues.
    ///
    /// - Parameters:
    ///   - database: The database whose queues are measured.
    ///   - prefix: A queue name's prefix, the gauges' `prefix` dimension (by default the name up to
    ///     its first `-`, the whole name if it has none).
    ///   - factory: The metrics backend (by default the one `MetricsSystem` was bootstrapped with).
    public init(
        database: TaskDatabase,
        prefix: @escaping @Sendable (String) -> String = TaskQueueGauges.prefix(separator: "-"),
        factory: any MetricsFactory = MetricsSystem.factory
    ) {
        self.database = database
        self.prefix = prefix
        self.factory = factory
    }

    /// A queue name's prefix: the name up to the first `separator`, the whole name without one.
    ///
    /// - Parameter separator: The character that ends a prefix.
    /// - Returns: The function that gives a name's prefix.
    public static func prefix(separator: Character) -> @Sendable (String) -> String {
        { name in name.firstIndex(of: separator).map { String(name[..<$0]) } ?? name }
    }

    /// What one prefix's gauges read.
    public struct Reading: Sendable, Hashable {
        /// Pending actions.
        public var depth = 0
        /// Plain parallel actions not yet done.
        public var parallelDepth = 0
        /// Seconds the longest-waiting pending action has waited (0 with none).
        public var oldestAgeSeconds = 0.0
        /// Dead letters.
        public var deadLetters = 0
        /// Queues with stored actions.
        public var queues = 0
        /// Queues paused by an operator or by a failure.
        public var paused = 0

        /// A reading of zeros (a prefix whose queues are gone).
        public init() {}
    }

    /// Reads the database's queues and records every prefix's gauges.
    ///
    /// - Parameter now: The time ages are measured to.
    /// - Returns: What was recorded, by prefix (prefixes that are gone read 0 and are included).
    /// - Throws: What ``TaskDatabase/snapshot()`` throws; nothing is recorded then.
    @discardableResult
    public func update(now: Date = Date()) async throws -> [String: Reading] {
        var readings: [String: Reading] = [:]
        for queue in try await database.snapshot() {
            var reading = readings[prefix(queue.name), default: Reading()]
            reading.depth += queue.pending
            reading.parallelDepth += queue.parallelPending
            reading.deadLetters += queue.deadLetters
            reading.queues += 1
            if queue.pausedByOperator || queue.pause != nil { reading.paused += 1 }
            if let oldest = queue.oldestSavedAt {
                reading.oldestAgeSeconds = max(reading.oldestAgeSeconds, max(0, now.timeIntervalSince(oldest)))
            }
            readings[prefix(queue.name)] = reading
        }
        let gone = recorded.withLock { recorded in
            let gone = recorded.subtracting(readings.keys)
            recorded = Set(readings.keys)
            return gone
        }
        for name in gone { readings[name] = Reading() }
        for (name, reading) in readings {
            let dimensions = [("prefix", name)]
            Gauge(label: "taskbroker_queue_depth", dimensions: dimensions, factory: factory).record(reading.depth)
            Gauge(label: "taskbroker_queue_parallel_depth", dimensions: dimensions, factory: factory).record(reading.parallelDepth)
            Gauge(label: "taskbroker_queue_oldest_age_seconds", dimensions: dimensions, factory: factory).record(reading.oldestAgeSeconds)
            Gauge(label: "taskbroker_queue_dead_letters", dimensions: dimensions, factory: factory).record(reading.deadLetters)
            Gauge(label: "taskbroker_queues", dimensions: dimensions, factory: factory).record(reading.queues)
            Gauge(label: "taskbroker_queues_paused", dimensions: dimensions, factory: factory).record(reading.paused)
        }
        return readings
    }
}

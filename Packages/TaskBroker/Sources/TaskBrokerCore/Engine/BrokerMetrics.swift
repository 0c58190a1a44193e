import Metrics

/// A broker's counters and timers (swift-metrics; silent unless a backend is bootstrapped).
struct BrokerMetrics: Sendable {
    let broker: String
    let handled: Counter
    let failed: Counter
    let retried: Counter
    /// Actions moved to the dead letters.
    let deadLettered: Counter
    let queueWait: Metrics.Timer
    let handleDuration: Metrics.Timer
    let leasesLost: Counter
    /// Actions whose handler runs now (the broker no longer waits for one past its time limit).
    let running: Meter

    private let factory: any MetricsFactory

    init(broker: String, factory: any MetricsFactory) {
        self.broker = broker
        self.factory = factory
        let dimensions = [("broker", broker)]
        handled = Counter(label: "taskbroker_actions_handled", dimensions: dimensions, factory: factory)
        failed = Counter(label: "taskbroker_actions_failed", dimensions: dimensions, factory: factory)
        retried = Counter(label: "taskbroker_actions_retried", dimensions: dimensions, factory: factory)
        deadLettered = Counter(label: "taskbroker_actions_dead_lettered", dimensions: dimensions, factory: factory)
        queueWait = Metrics.Timer(label: "taskbroker_queue_wait", dimensions: dimensions, factory: factory)
        handleDuration = Metrics.Timer(label: "taskbroker_handle_duration", dimensions: dimensions, factory: factory)
        leasesLost = Counter(label: "taskbroker_leases_lost", dimensions: dimensions, factory: factory)
        running = Meter(label: "taskbroker_actions_running", dimensions: dimensions, factory: factory)
    }

    /// Failed storage operations of one kind (each retried after a backoff).
    func storageFailures(_ operation: TaskStorageOperation) -> Counter {
        Counter(label: "taskbroker_storage_failures", dimensions: [("broker", broker), ("operation", operation.rawValue)], factory: factory)
    }
}

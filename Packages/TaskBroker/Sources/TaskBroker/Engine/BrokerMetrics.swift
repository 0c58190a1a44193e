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

    init(broker: String) {
        self.broker = broker
        let dimensions = [("broker", broker)]
        handled = Counter(label: "taskbroker_actions_handled", dimensions: dimensions)
        failed = Counter(label: "taskbroker_actions_failed", dimensions: dimensions)
        retried = Counter(label: "taskbroker_actions_retried", dimensions: dimensions)
        deadLettered = Counter(label: "taskbroker_actions_dead_lettered", dimensions: dimensions)
        queueWait = Metrics.Timer(label: "taskbroker_queue_wait", dimensions: dimensions)
        handleDuration = Metrics.Timer(label: "taskbroker_handle_duration", dimensions: dimensions)
        leasesLost = Counter(label: "taskbroker_leases_lost", dimensions: dimensions)
    }

    /// Failed storage operations of one kind (each retried after a backoff).
    func storageFailures(_ operation: TaskStorageOperation) -> Counter {
        Counter(label: "taskbroker_storage_failures", dimensions: [("broker", broker), ("operation", operation.rawValue)])
    }
}

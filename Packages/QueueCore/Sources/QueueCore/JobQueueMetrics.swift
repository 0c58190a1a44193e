import Metrics

/// The counters a ``JobQueue`` reports through swift-metrics (silent unless the application
/// bootstraps a metrics backend), each with a `queue` dimension:
/// `queuekit_jobs_added_total`, `queuekit_jobs_processed_total`, `queuekit_jobs_failed_total`
/// and `queuekit_jobs_dropped_total` (given up by the retry strategy, or failed without one).
@usableFromInline
final class JobQueueMetrics: Sendable {
    private let added: Counter
    private let processedCounter: Counter
    private let failed: Counter
    private let dropped: Counter

    init(queueName: String) {
        let dimensions = [("queue", queueName)]
        added = Counter(label: "queuekit_jobs_added_total", dimensions: dimensions)
        processedCounter = Counter(label: "queuekit_jobs_processed_total", dimensions: dimensions)
        failed = Counter(label: "queuekit_jobs_failed_total", dimensions: dimensions)
        dropped = Counter(label: "queuekit_jobs_dropped_total", dimensions: dimensions)
    }

    @usableFromInline
    func didAdd(_ count: Int) {
        added.increment(by: count)
    }

    @usableFromInline
    func didProcess() {
        processedCounter.increment()
    }

    func didFail() {
        failed.increment()
    }

    func didDrop() {
        dropped.increment()
    }
}

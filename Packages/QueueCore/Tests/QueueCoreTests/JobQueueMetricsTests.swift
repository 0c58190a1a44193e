import AsyncPrimitivesTesting
import CoreMetrics
import MetricsTestKit
import QueueCore
import QueueCoreTesting
import Testing

@Suite(.timeLimit(.minutes(1)))
struct JobQueueMetricsTests {
    /// The process-wide metrics backend; bootstrapped once, only by this suite.
    private static let metrics: TestMetrics = {
        let metrics = TestMetrics()
        MetricsSystem.bootstrap(metrics)
        return metrics
    }()

    @Test
    func countersReportAddedProcessedFailedAndDroppedJobsPerQueue() async throws {
        let metrics = Self.metrics
        let queue = JobQueue(handling: CuteJob.self, name: "metered")
        queue.processor = AnyJobProcessor { job in
            if job.action == "1" { throw TestFailure() }
        }
        let done = EventCollector<JobQueueEvent>()
        let token = queue.observe { _, _, event in
            if event == .processed || event == .failedToProcess { done.record(event) }
        }
        queue.add(makeJobs(count: 3))
        queue.start()
        _ = await done.values(count: 3)

        let dimensions = [("queue", "metered")]
        #expect(try metrics.expectCounter("queuekit_jobs_added_total", dimensions).totalValue == 3)
        #expect(try metrics.expectCounter("queuekit_jobs_processed_total", dimensions).totalValue == 2)
        #expect(try metrics.expectCounter("queuekit_jobs_failed_total", dimensions).totalValue == 1)
        #expect(try metrics.expectCounter("queuekit_jobs_dropped_total", dimensions).totalValue == 1)
        withExtendedLifetime(token) {}
    }
}

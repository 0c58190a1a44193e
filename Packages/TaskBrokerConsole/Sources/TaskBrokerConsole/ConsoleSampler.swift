import Foundation
public import ServiceLifecycle
import TaskBroker

extension TaskBrokerConsole: Service {
    /// Samples every queue's counts for the charts every
    /// ``Configuration-swift.struct/chartSpacing`` until the task is cancelled or the service group
    /// shuts down gracefully, so that the charts cover the whole time the server runs, not only
    /// the moments a page, a live stream or a chart was open. Optional: add the console to the
    /// application's services (`Application(router:services:)`) to have it.
    ///
    /// A sample whose read fails is skipped (the chart shows a gap), and the next one is taken on
    /// time: the database that did not answer is what the console's pages report.
    public func run() async throws {
        await cancelWhenGracefulShutdown {
            await sample(every: configuration.chartSpacing, now: Date.init) { try await Task.sleep(for: $0) }
        }
    }

    /// Takes a sample at `now()`, then waits with `sleep` and takes the next, until cancelled (or
    /// `sleep` throws).
    func sample(every spacing: Duration, now: () -> Date, sleep: (Duration) async throws -> Void) async {
        while !Task.isCancelled {
            if let queues = try? await database.snapshot() {
                history.record(queues, at: now())
            }
            do {
                try await sleep(spacing)
            } catch {
                return
            }
        }
    }
}

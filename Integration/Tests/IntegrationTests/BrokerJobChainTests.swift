import AsyncPrimitives
import AsyncPrimitivesTesting
import Dispatch
import Foundation
import JobChain
import Synchronization
import TaskBroker
import Testing

/// An action whose handler runs a JobChain of steps.
private struct ReportAction: TaskQueueAction, Equatable {
    var key: String
    var collection = "reports"
    var queueName: String
    var failingStepOnFirstAttempt: String?
}

private struct StepFailed: Error, Equatable {
    let step: String
}

/// Runs each report as a JobChain (fetch in the background, render on a utility queue, publish
/// in the background) and reports the chain's outcome through a `FutureResult`.
private final class ReportHandler: TaskQueueHandler {
    typealias Action = ReportAction

    let outcomes = EventCollector<String>()
    private let attempts = Mutex<[String: Int]>([:])

    func handleNextItem(
        _ action: ReportAction,
        completion: @escaping @Sendable (_ success: Bool, _ retryTimeout: TimeInterval) -> Void
    ) {
        let attempt = attempts.withLock { attempts -> Int in
            attempts[action.key, default: 0] += 1
            return attempts[action.key, default: 0]
        }
        let steps = Mutex<[String]>([])
        let failing = attempt == 1 ? action.failingStepOnFirstAttempt : nil
        let step: @Sendable (String) throws -> Void = { name in
            if name == failing { throw StepFailed(step: name) }
            steps.withLock { $0.append(name) }
        }
        let result = DeferredResult<[String]>()
        let job = Job.doingInBackground { try step("fetch") }
            .doInUtility { try step("render") }
            .doInBackground { try step("publish") }
        Task {
            do {
                try await job.idle()
                result.success(value: steps.withLock { $0 })
            } catch {
                result.failure(error: error)
            }
        }
        let outcomes = self.outcomes
        (result as FutureResult<[String]>).then(upon: .global()) { outcome in
            switch outcome {
            case .success(let steps):
                outcomes.record("\(action.key) ok: \(steps.joined(separator: ","))")
                completion(true, 0)
            case .failure(let error):
                outcomes.record("\(action.key) failed: \(error)")
                completion(false, 0)
            }
        }
    }
}

@Suite(.timeLimit(.minutes(1)))
struct BrokerJobChainTests {
    @Test func brokerRunsAJobChainPerActionAndRetriesTheActionWhenAStepFails() async throws {
        let folder = try TemporaryDirectory()
        let database = try await TaskDatabase.sqlite(path: folder.path("tasks.sqlite"))
        let handler = ReportHandler()
        let broker = try await TaskQueueBroker.setup(database: database, name: "reports", handler: handler)
        let events = EventCollector<TaskBrokerEvent>()
        let succeeded = EventCollector<String>()
        let stream = broker.events
        let listening = Task {
            for await event in stream {
                events.record(event)
                if case .succeeded(_, let key, _) = event { succeeded.record(key) }
            }
        }

        try await database.save([
            ReportAction(key: "r1", queueName: "reports-monthly", failingStepOnFirstAttempt: "render"),
            ReportAction(key: "r2", queueName: "reports-monthly"),
        ])

        #expect(await handler.outcomes.values(count: 3) == [
            "r1 failed: StepFailed(step: \"render\")",
            "r1 ok: fetch,render,publish",
            "r2 ok: fetch,render,publish",
        ])
        #expect(await succeeded.values(count: 2) == ["r1", "r2"])
        // A zero retry timeout may or may not pass through a `.resumed`; everything else is exact.
        let seen = events.values.filter { if case .resumed = $0 { false } else { true } }
        #expect(seen == [
            .started(queueName: "reports-monthly", key: "r1", collection: "reports", attempt: 1),
            .failed(queueName: "reports-monthly", key: "r1", collection: "reports", result: .retry(after: .zero)),
            .started(queueName: "reports-monthly", key: "r1", collection: "reports", attempt: 2),
            .succeeded(queueName: "reports-monthly", key: "r1", collection: "reports"),
            .started(queueName: "reports-monthly", key: "r2", collection: "reports", attempt: 1),
            .succeeded(queueName: "reports-monthly", key: "r2", collection: "reports"),
        ])
        await broker.shutdown()
        listening.cancel()
        #expect(try await database.snapshot().isEmpty)
    }
}

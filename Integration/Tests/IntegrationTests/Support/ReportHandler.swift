import AsyncPrimitives
import AsyncPrimitivesTesting
import Dispatch
import Foundation
import JobChain
import Synchronization
import TaskBroker

/// An action whose handler runs a JobChain of steps.
struct ReportAction: TaskQueueAction, Equatable {
    var key: String
    var collection = "reports"
    var queueName: String
    var failingStepOnFirstAttempt: String?
}

struct StepFailed: Error, Equatable {
    let step: String
}

/// Runs each report as a JobChain (fetch in the background, render on a utility queue, publish
/// in the background) and reports the chain's outcome through a `FutureResult`.
final class ReportHandler: TaskQueueHandler {
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


import Foundation
import Logging
import Metrics
import Synchronization

// What a broker tells its listeners, its metrics and its log.
extension BrokerEngine {
    func report(_ event: TaskBrokerEvent) {
        switch event {
        case .started(let queueName, let key, _, _):
            currentView.withLock { $0.inFlight[queueName] = key }
        case .succeeded(let queueName, _, _):
            currentView.withLock { _ = $0.inFlight.removeValue(forKey: queueName) }
            metrics.handled.increment()
        case .deadLettered(let queueName, let key, let collection, let reason):
            metrics.deadLettered.increment()
            logger.notice("action \(collection)/\(key) of \(queueName) moved to the dead letters: \(reason)")
        case .failed(let queueName, let key, let collection, let result):
            currentView.withLock { _ = $0.inFlight.removeValue(forKey: queueName) }
            metrics.failed.increment()
            if case .retry = result { metrics.retried.increment() }
            logger.debug("action \(collection)/\(key) of \(queueName) failed: \(result)")
        case .discarded(let queueName, _, _):
            currentView.withLock { _ = $0.inFlight.removeValue(forKey: queueName) }
        case .leaseLost(let queueName, let key, let collection):
            currentView.withLock { _ = $0.inFlight.removeValue(forKey: queueName) }
            metrics.leasesLost.increment()
            logger.warning(
                "lost the lease on \(queueName) while \(collection)/\(key) ran: another worker took the queue over; the outcome was not stored and the action runs there again"
            )
        case .paused(let queueName):
            logger.info("queue \(queueName) is paused by an operator; it starts nothing until resumed")
        case .undecodable(let queueName, let key, let collection):
            logger.error("action \(collection)/\(key) of \(queueName) does not decode as \(Handler.Action.self); pausing its queue until restarted")
        case .storageFailed(let operation, let queueNames, let message, let retryIn):
            currentView.withLock { view in
                for queueName in queueNames {
                    view.storageFailures[queueName] = "\(operation) failed: \(message)"
                }
            }
            metrics.storageFailures(operation).increment()
            logger.error(
                "could not \(operation) for \(queueNames.count) queue(s) (\(Self.summary(queueNames))); they wait and it is tried again in \(retryIn): \(message)"
            )
        case .storageRecovered(let operation, let queueNames):
            currentView.withLock { view in
                for queueName in queueNames {
                    view.storageFailures[queueName] = nil
                }
            }
            logger.notice("\(operation) works again for \(queueNames.count) queue(s) (\(Self.summary(queueNames)))")
        case .resumed, .stopped:
            break
        }
        events.yield(event)
    }

    /// Reports an event of the plain parallel actions: to the events and the metrics, as the
    /// queues' own (``report(_:)``), but with no bookkeeping per queue.
    static func reportParallel(_ event: TaskBrokerEvent, events: EventBroadcaster<TaskBrokerEvent>, metrics: BrokerMetrics, logger: Logger) {
        switch event {
        case .succeeded: metrics.handled.increment()
        case .deadLettered(let queueName, let key, let collection, let reason):
            metrics.deadLettered.increment()
            logger.notice("parallel action \(collection)/\(key) of \(queueName) moved to the dead letters: \(reason)")
        case .failed(_, _, _, let result):
            metrics.failed.increment()
            if case .retry = result { metrics.retried.increment() }
        case .leaseLost(let queueName, let key, let collection):
            metrics.leasesLost.increment()
            logger.warning("lost the claim on parallel action \(collection)/\(key) of \(queueName): its outcome was not stored, and it runs again")
        case .undecodable(let queueName, let key, let collection):
            logger.error("parallel action \(collection)/\(key) of \(queueName) does not decode as the handler's action type; it is held until a broker starts again")
        case .storageFailed(let operation, _, let message, let retryIn):
            metrics.storageFailures(operation).increment()
            logger.error("could not \(operation) parallel actions; tried again in \(retryIn): \(message)")
        default: break
        }
        events.yield(event)
    }

    /// The first queue names of a list, for a log line.
    static func summary(_ queueNames: [String]) -> String {
        let shown = queueNames.prefix(5).joined(separator: ", ")
        return queueNames.count > 5 ? "\(shown), and \(queueNames.count - 5) more" : shown
    }
}

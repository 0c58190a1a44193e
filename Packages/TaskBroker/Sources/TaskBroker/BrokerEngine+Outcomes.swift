import Foundation
import Logging
import Metrics
import Synchronization

extension BrokerEngine {
    // MARK: Finished actions

    func isHeld(_ task: StoredTask, in driver: Driver) -> Bool {
        guard let held = driver.queues[task.queueName]?.held?.task else { return false }
        return held.key == task.key && held.collection == task.collection && held.revision == task.revision
    }

    func discard(_ task: StoredTask, in driver: inout Driver) {
        finishRunning(task.queueName, in: &driver)
        events.yield(.discarded(queueName: task.queueName, key: task.key, collection: task.collection))
        markReady(task.queueName, in: &driver)
    }

    func committed(_ batch: [Finished], succeeded: Bool, in driver: inout Driver) {
        for finished in batch {
            let task = finished.task
            let queueName = task.queueName
            guard isHeld(task, in: driver) else {
                // Deleted or replaced while its outcome was being stored (the store was a no-op).
                discard(task, in: &driver)
                continue
            }
            finishRunning(queueName, in: &driver)
            guard var state = driver.queues.removeValue(forKey: queueName), var held = state.held else { continue }
            defer {
                driver.queues[queueName] = state
                markReady(queueName, in: &driver)
            }
            if !succeeded {
                // Unknown what is on disk: keep the action first and wait for a restart.
                held.task.pause = .untilRestart
                state.held = held
                continue
            }
            switch finished.result {
            case .success:
                state.held = nil
                driver.locations[ActionID(task)] = nil
                handled.increment()
                events.yield(.succeeded(queueName: queueName, key: task.key, collection: task.collection))
            case .retry, .waitForRestart:
                held.task.attempts += 1
                held.task.pause = finished.pause
                state.held = held
                failed.increment()
                if case .retry = finished.result { retried.increment() }
                logger.debug("action \(task.collection)/\(task.key) of \(queueName) failed: \(finished.result)")
                events.yield(.failed(queueName: queueName, key: task.key, collection: task.collection, result: finished.result))
                if case .until(let date)? = finished.pause {
                    driver.queues[queueName] = state
                    startTimer(queueName, until: date, in: &driver)
                    state = driver.queues.removeValue(forKey: queueName) ?? state
                }
            }
        }
    }

    func finishRunning(_ queueName: String, in driver: inout Driver) {
        driver.queues[queueName]?.inFlight = nil
        driver.running -= 1
        _ = inFlightView.withLock { $0.removeValue(forKey: queueName) }
    }
}

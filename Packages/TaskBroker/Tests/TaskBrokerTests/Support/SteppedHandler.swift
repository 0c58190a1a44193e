import AsyncPrimitivesTesting
import Synchronization
import TaskBroker

/// Holds every run until the test finishes it with an outcome of its choice, records each run
/// (queue, key, version, attempt), and counts overlaps: a run that starts while another run of the
/// same queue has not returned.
///
/// A cancelled run (a shutdown past its timeout) returns `.success` at once: the broker must
/// ignore it, and if it stored it the action would be gone from storage.
final class SteppedHandler: AsyncTaskQueueHandler {
    let runs = EventCollector<BrokerModel.Run>()

    private struct Waiting {
        let id: UInt64
        let continuation: CheckedContinuation<TaskResult, Never>
    }

    private struct State {
        var nextID: UInt64 = 0
        var running: [String: Int] = [:]
        var overlaps = 0
        /// Runs waiting for their outcome, oldest first, per queue.
        var waiting: [String: [Waiting]] = [:]
        /// Outcomes given before their run reached its wait, per queue.
        var early: [String: [TaskResult]] = [:]
        var cancelledEarly: Set<UInt64> = []
        var finishesEverything = false
    }

    private let state = Mutex(State())

    /// How many runs started while another run of their queue had not returned.
    var overlaps: Int { state.withLock { $0.overlaps } }

    /// The queues with a run that has started and not returned.
    var runningQueues: Set<String> {
        state.withLock { Set($0.running.filter { $0.value > 0 }.keys) }
    }

    func handle(_ action: VersionedAction, context: TaskContext) async -> TaskResult {
        let queue = context.queueName
        let id = state.withLock { state -> UInt64 in
            if state.running[queue, default: 0] > 0 { state.overlaps += 1 }
            state.running[queue, default: 0] += 1
            state.nextID += 1
            return state.nextID
        }
        runs.record(BrokerModel.Run(queue: queue, key: action.key, version: action.version, attempt: context.attempt))
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<TaskResult, Never>) in
                let ready = state.withLock { state -> TaskResult? in
                    if state.cancelledEarly.remove(id) != nil { return .success }
                    if var early = state.early[queue], !early.isEmpty {
                        let result = early.removeFirst()
                        state.early[queue] = early
                        return result
                    }
                    if state.finishesEverything { return .success }
                    state.waiting[queue, default: []].append(Waiting(id: id, continuation: continuation))
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let cancelled = state.withLock { state -> CheckedContinuation<TaskResult, Never>? in
                guard let index = state.waiting[queue]?.firstIndex(where: { $0.id == id }) else {
                    state.cancelledEarly.insert(id)
                    return nil
                }
                return state.waiting[queue]?.remove(at: index).continuation
            }
            cancelled?.resume(returning: .success)
        }
        state.withLock { $0.running[queue, default: 0] -= 1 }
        return result
    }

    /// The oldest run of `queue` returns `result` (now, or as soon as it reaches its wait).
    func finish(_ queue: String, with result: TaskResult) {
        let waiting = state.withLock { state -> CheckedContinuation<TaskResult, Never>? in
            guard var waiting = state.waiting[queue], !waiting.isEmpty else {
                state.early[queue, default: []].append(result)
                return nil
            }
            let first = waiting.removeFirst()
            state.waiting[queue] = waiting
            return first.continuation
        }
        waiting?.resume(returning: result)
    }

    /// Every run waiting, or yet to come, succeeds at once, except those already given an outcome.
    func finishEverything() {
        let waiting = state.withLock { state -> [CheckedContinuation<TaskResult, Never>] in
            state.finishesEverything = true
            defer { state.waiting = [:] }
            return state.waiting.values.flatMap { $0.map(\.continuation) }
        }
        for continuation in waiting {
            continuation.resume(returning: .success)
        }
    }
}

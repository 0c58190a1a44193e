import AsyncPrimitivesTesting
import Foundation
import Synchronization
import TaskBroker

/// A plain action: runs in `queueName`, ordered by enqueue order.
struct TestAction: TaskQueueAction, Equatable {
    var key: String
    var collection = "actions"
    var queueName: String
    var priority = 0
}

/// An action ordered by `priority` (smaller first), like the seed's date-ordered message action.
struct PrioritizedAction: TaskQueueAction, Equatable {
    var key: String
    var collection = "prioritized"
    var queueName: String
    var priority: Int

    func sort(_ other: PrioritizedAction) -> ComparisonResult {
        priority < other.priority ? .orderedAscending : priority > other.priority ? .orderedDescending : .orderedSame
    }
}

/// Records every action it is given and answers with scripted results (success by default).
final class RecordingHandler<Action: TaskQueueAction>: AsyncTaskQueueHandler {
    let handled = EventCollector<String>()
    private let script = Mutex<[String: [TaskResult]]>([:])
    private let onHandle: (@Sendable (Action) async -> Void)?

    init(onHandle: (@Sendable (Action) async -> Void)? = nil) {
        self.onHandle = onHandle
    }

    /// The next runs of `key` answer `results`, in order; later runs succeed.
    func script(_ key: String, _ results: TaskResult...) {
        script.withLock { $0[key, default: []] += results }
    }

    func handle(_ action: Action, context _: TaskContext) async -> TaskResult {
        handled.record(action.key)
        await onHandle?(action)
        return script.withLock { script in
            guard var results = script[action.key], !results.isEmpty else { return .success }
            let result = results.removeFirst()
            script[action.key] = results
            return result
        }
    }
}

/// A handler written like the seed's: it implements only the callback form.
final class CallbackHandler: TaskQueueHandler {
    let handled = EventCollector<String>()
    private let answers = Mutex<[String: [(Bool, TimeInterval)]]>([:])

    func answer(_ key: String, success: Bool, retryTimeout: TimeInterval) {
        answers.withLock { $0[key, default: []].append((success, retryTimeout)) }
    }

    func handleNextItem(_ action: TestAction, completion: @escaping @Sendable (Bool, TimeInterval) -> Void) {
        handled.record(action.key)
        let answer = answers.withLock { answers -> (Bool, TimeInterval) in
            guard var list = answers[action.key], !list.isEmpty else { return (true, 0) }
            let first = list.removeFirst()
            answers[action.key] = list
            return first
        }
        completion(answer.0, answer.1)
        completion(false, -1)  // a second call must be ignored
    }
}

/// Holds every action until the test releases it, so a test can act while an action is in flight.
final class GateHandler: AsyncTaskQueueHandler {
    let started = EventCollector<String>()
    private let gates = Mutex<(open: Set<String>, waiting: [String: CheckedContinuation<Void, Never>])>(([], [:]))

    func handle(_ action: TestAction, context _: TaskContext) async -> TaskResult {
        started.record(action.key)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let isOpen = gates.withLock { gates -> Bool in
                if gates.open.contains(action.key) { return true }
                gates.waiting[action.key] = continuation
                return false
            }
            if isOpen { continuation.resume() }
        }
        return .success
    }

    /// Lets the run of `key` finish (now, or as soon as it starts).
    func release(_ key: String) {
        let waiting = gates.withLock { gates -> CheckedContinuation<Void, Never>? in
            gates.open.insert(key)
            return gates.waiting.removeValue(forKey: key)
        }
        waiting?.resume()
    }
}

/// Collects a broker's events from the moment it is created.
final class EventRecorder: Sendable {
    let events = EventCollector<TaskBrokerEvent>()
    private let task: Task<Void, Never>

    init(_ broker: TaskQueueBroker) {
        let stream = broker.events
        let events = self.events
        task = Task {
            for await event in stream {
                events.record(event)
            }
        }
    }

    /// Waits for the first event that matches, returning every event up to it.
    func wait(for match: @Sendable (TaskBrokerEvent) -> Bool) async -> [TaskBrokerEvent] {
        var count = 1
        while true {
            let values = await events.values(count: count)
            guard values.count == count else { return values }  // cancelled (past the time limit)
            if match(values[count - 1]) { return values }
            count += 1
        }
    }

    /// Waits for the `occurrence`-th event that matches, returning every event up to it.
    func wait(for match: @Sendable (TaskBrokerEvent) -> Bool, occurrence: Int) async -> [TaskBrokerEvent] {
        var count = 1
        var seen = 0
        while true {
            let values = await events.values(count: count)
            guard values.count == count else { return values }  // cancelled (past the time limit)
            if match(values[count - 1]) {
                seen += 1
                if seen == occurrence { return values }
            }
            count += 1
        }
    }

    deinit {
        task.cancel()
    }
}

extension TaskBrokerEvent {
    var isFailure: Bool {
        if case .failed = self { return true }
        return false
    }

    func isSuccess(_ key: String) -> Bool {
        if case .succeeded(_, let k, _) = self { return k == key }
        return false
    }
}

extension [TaskQueueSnapshot] {
    /// The snapshots without their saved times (which the clock decides), for comparisons.
    var withoutSavedTimes: [TaskQueueSnapshot] {
        map { snapshot in
            var snapshot = snapshot
            snapshot.oldestSavedAt = nil
            return snapshot
        }
    }
}

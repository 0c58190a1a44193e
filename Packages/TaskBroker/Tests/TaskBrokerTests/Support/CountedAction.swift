import AsyncPrimitivesTesting
import Foundation
import Synchronization
import TaskBroker

/// An action that counts how many times it is decoded, per collection: what a broker holds in
/// memory is what it decoded.
struct CountedAction: TaskQueueAction, Equatable {
    var key: String
    var collection: String
    var queueName: String

    private enum CodingKeys: String, CodingKey {
        case key, collection, queueName
    }

    init(key: String, collection: String, queueName: String) {
        self.key = key
        self.collection = collection
        self.queueName = queueName
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        key = try container.decode(String.self, forKey: .key)
        collection = try container.decode(String.self, forKey: .collection)
        queueName = try container.decode(String.self, forKey: .queueName)
        Self.decodes.withLock { $0[collection, default: 0] += 1 }
    }

    private static let decodes = Mutex<[String: Int]>([:])

    /// How many actions of `collection` were decoded so far.
    static func decoded(in collection: String) -> Int {
        decodes.withLock { $0[collection] ?? 0 }
    }
}

/// Records each action it is given and holds every run until ``open()``.
final class GatedRecordingHandler: AsyncTaskQueueHandler {
    let handled = EventCollector<String>()
    private let gate = Mutex<(open: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

    func handle(_ action: CountedAction, context _: TaskContext) async -> TaskResult {
        handled.record(action.key)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let isOpen = gate.withLock { gate -> Bool in
                if gate.open { return true }
                gate.waiting.append(continuation)
                return false
            }
            if isOpen { continuation.resume() }
        }
        return .success
    }

    /// Lets every run held so far, and every later one, finish.
    func open() {
        let waiting = gate.withLock { gate -> [CheckedContinuation<Void, Never>] in
            gate.open = true
            defer { gate.waiting = [] }
            return gate.waiting
        }
        for continuation in waiting { continuation.resume() }
    }
}

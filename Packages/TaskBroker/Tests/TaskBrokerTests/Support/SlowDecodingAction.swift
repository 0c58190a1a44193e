import AsyncPrimitivesTesting
import Dispatch
import Foundation
import Synchronization
import TaskBroker

/// An action whose `init(from:)` stops at its collection's ``DecodingGate`` until the test opens
/// it: a decoder that is slow, or that blocks, as user code may.
struct SlowDecodingAction: TaskQueueAction {
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
        DecodingGate.of(collection).pass(key)
    }
}

/// Holds each decoding of its collection's actions (the calling thread waits) until ``open()``,
/// or at most ``limit``, after which it lets the decoding go on and remembers that it had to.
final class DecodingGate: Sendable {
    /// The longest a decoding waits for the gate.
    static let limit: DispatchTimeInterval = .seconds(10)

    /// The keys of the actions whose decoding reached the gate, in order.
    let entered = EventCollector<String>()
    private let opened = DispatchSemaphore(value: 0)
    private let state = Mutex<(open: Bool, timedOut: Bool)>((false, false))

    private static let gates = Mutex<[String: DecodingGate]>([:])

    /// The gate of a collection (made at its first use).
    static func of(_ collection: String) -> DecodingGate {
        gates.withLock { gates in
            if let gate = gates[collection] { return gate }
            let gate = DecodingGate()
            gates[collection] = gate
            return gate
        }
    }

    /// Whether a decoding gave up waiting: the gate was not opened within ``limit``.
    var timedOut: Bool { state.withLock { $0.timedOut } }

    /// Lets every waiting and later decoding through.
    func open() {
        state.withLock { $0.open = true }
        opened.signal()
    }

    fileprivate func pass(_ key: String) {
        entered.record(key)
        guard !state.withLock({ $0.open }) else { return }
        if opened.wait(timeout: .now() + Self.limit) == .timedOut {
            state.withLock { $0.timedOut = true }
        } else {
            // One signal per opening: the next waiter (if any) gets it too.
            opened.signal()
        }
    }
}

import Foundation
import Synchronization

/// What the `TaskDatabase`s of one process that share a file also share: the brokers' claims and
/// the change notifications.
final class DatabaseHub: Sendable {
    let notifier = ChangeNotifier()
    let registry = ClaimRegistry()

    private static let byPath = Mutex<[String: DatabaseHub]>([:])

    /// The hub of a database file, the same for every `TaskDatabase` opened on it in this process.
    static func shared(forPath path: String) -> DatabaseHub {
        let key = URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
        return byPath.withLock { hubs in
            if let hub = hubs[key] { return hub }
            let hub = DatabaseHub()
            hubs[key] = hub
            return hub
        }
    }
}

/// Which broker of this process owns which queue; two brokers never own the same queue.
final class ClaimRegistry: Sendable {
    struct Broker {
        let name: String
        let isPrefixClaim: Bool
    }

    private struct State {
        var brokers: [UInt64: Broker] = [:]
        var owners: [String: UInt64] = [:]
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())

    /// Registers a broker and takes the stored queues it claims.
    ///
    /// - Parameters:
    ///   - broker: The broker's name and claim kind.
    ///   - mine: The stored queues the broker's claim accepts (computed by the caller, outside the lock).
    /// - Returns: The broker's id.
    /// - Throws: `queueAlreadyClaimed` when another broker has the same name, an overlapping
    ///   prefix, or already owns one of `mine`.
    func register(_ broker: Broker, claiming mine: [String]) throws -> UInt64 {
        try state.withLock { state in
            for other in state.brokers.values {
                if other.name == broker.name {
                    throw TaskBrokerError(
                        code: .queueAlreadyClaimed,
                        message: "A broker named \"\(broker.name)\" is already set up on this database; shut it down first or choose another name."
                    )
                }
                if broker.isPrefixClaim, other.isPrefixClaim,
                   broker.name.hasPrefix(other.name) || other.name.hasPrefix(broker.name) {
                    throw TaskBrokerError(
                        code: .queueAlreadyClaimed,
                        message: "Broker \"\(broker.name)\" would claim queues that broker \"\(other.name)\" claims (one name is a prefix of the other); pick names that are not prefixes of each other, or claim with a filter."
                    )
                }
            }
            for queue in mine {
                if let owner = state.owners[queue], let other = state.brokers[owner] {
                    throw TaskBrokerError(
                        code: .queueAlreadyClaimed,
                        message: "Queue \"\(queue)\" is already claimed by broker \"\(other.name)\"; make the brokers' filters disjoint."
                    )
                }
            }
            state.nextID += 1
            let id = state.nextID
            state.brokers[id] = broker
            for queue in mine {
                state.owners[queue] = id
            }
            return id
        }
    }

    /// Takes ownership of `queue` for broker `id` unless another broker owns it.
    ///
    /// - Returns: Whether broker `id` owns the queue now.
    func own(_ queue: String, by id: UInt64) -> Bool {
        state.withLock { state in
            if let owner = state.owners[queue] { return owner == id }
            state.owners[queue] = id
            return true
        }
    }

    /// Forgets a broker and every queue it owns.
    func unregister(_ id: UInt64) {
        state.withLock { state in
            state.brokers[id] = nil
            state.owners = state.owners.filter { $0.value != id }
        }
    }
}

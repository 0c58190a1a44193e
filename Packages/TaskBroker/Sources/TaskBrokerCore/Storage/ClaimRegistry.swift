import Foundation
import Synchronization

/// Which broker of this process owns which queue; two brokers never own the same queue.
final class ClaimRegistry: Sendable {
    private struct State {
        var brokers: [UInt64: BrokerClaim] = [:]
        var owners: [String: UInt64] = [:]
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())

    /// Registers a broker.
    ///
    /// - Parameter broker: The broker's name and claim kind.
    /// - Returns: The broker's id.
    /// - Throws: `queueAlreadyClaimed` when another broker has the same name or an overlapping prefix.
    func register(_ broker: BrokerClaim) throws -> UInt64 {
        try state.withLock { state in
            for other in state.brokers.values {
                if let conflict = broker.conflict(with: other) { throw conflict }
            }
            state.nextID += 1
            let id = state.nextID
            state.brokers[id] = broker
            return id
        }
    }

    /// Takes the stored queues a newly registered broker claims.
    ///
    /// - Parameters:
    ///   - queues: The stored queues the broker's claim accepts (computed by the caller, outside the lock).
    ///   - id: The broker.
    /// - Throws: `queueAlreadyClaimed` when another broker already owns one of them; nothing is taken then.
    func claim(_ queues: [String], by id: UInt64) throws {
        try state.withLock { state in
            for queue in queues {
                if let owner = state.owners[queue], owner != id, let other = state.brokers[owner] {
                    throw TaskBrokerError(
                        code: .queueAlreadyClaimed,
                        message: "Queue \"\(queue)\" is already claimed by broker \"\(other.name)\"; make the brokers' filters disjoint."
                    )
                }
            }
            for queue in queues {
                state.owners[queue] = id
            }
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

    /// Ends broker `id`'s claim on queues it forgot (it had nothing left of them): the next broker
    /// that sees one of them changed may take it.
    func disown(_ queues: [String], by id: UInt64) {
        state.withLock { state in
            for queue in queues where state.owners[queue] == id {
                state.owners[queue] = nil
            }
        }
    }

    /// Forgets a broker and every queue it owns.
    ///
    /// - Returns: The queues it owned, sorted: another broker whose filter accepts one may take it now.
    @discardableResult
    func unregister(_ id: UInt64) -> [String] {
        state.withLock { state in
            state.brokers[id] = nil
            let freed = state.owners.filter { $0.value == id }.keys.sorted()
            state.owners = state.owners.filter { $0.value != id }
            return freed
        }
    }
}

/// What a broker claims: the queues whose name starts with its name, or those its filter accepts.
package struct BrokerClaim: Sendable, Hashable {
    package let name: String
    package let isPrefixClaim: Bool

    /// A claim of the queues whose name starts with `name` (`isPrefixClaim`) or of those a filter accepts.
    package init(name: String, isPrefixClaim: Bool) {
        self.name = name
        self.isPrefixClaim = isPrefixClaim
    }

    /// Why this broker and `other` cannot both run: the same name, or prefixes of each other.
    package func conflict(with other: BrokerClaim) -> TaskBrokerError? {
        if other.name == name {
            return TaskBrokerError(
                code: .queueAlreadyClaimed,
                message: "A broker named \"\(name)\" is already set up on this database; shut it down first or choose another name."
            )
        }
        if isPrefixClaim, other.isPrefixClaim, name.hasPrefix(other.name) || other.name.hasPrefix(name) {
            return TaskBrokerError(
                code: .queueAlreadyClaimed,
                message: "Broker \"\(name)\" would claim queues that broker \"\(other.name)\" claims (one name is a prefix of the other); pick names that are not prefixes of each other, or claim with a filter."
            )
        }
        return nil
    }
}

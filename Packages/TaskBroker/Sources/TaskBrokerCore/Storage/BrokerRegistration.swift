import Synchronization

/// A broker's place among the brokers of a database: its claim in this process, its lock against
/// other processes and the watcher of their changes (``MachineLocalStorage``), or the change feed
/// and its name among other processes' (a shared backend), and its change listener.
/// ``cancel()`` gives all of it back.
final class BrokerRegistration: Sendable {
    let brokerID: UInt64
    private let claim: BrokerClaim
    private let hub: DatabaseHub
    /// Gives back the lock against other processes and the watcher (``MachineLocalStorage``).
    private let releaseLock: (@Sendable () -> Void)?
    private let feeds: Bool
    /// Where the broker's name is recorded for other processes (shared backends that keep them).
    private let names: (any SharedBrokerNames)?
    private let state = Mutex<(listener: UInt64?, cancelled: Bool)>((nil, false))

    init(
        brokerID: UInt64, claim: BrokerClaim, hub: DatabaseHub, releaseLock: (@Sendable () -> Void)? = nil, feeds: Bool = false,
        names: (any SharedBrokerNames)? = nil
    ) {
        self.names = names
        self.brokerID = brokerID
        self.claim = claim
        self.hub = hub
        self.releaseLock = releaseLock
        self.feeds = feeds
    }

    /// Takes the stored queues the broker claims.
    ///
    /// - Throws: `queueAlreadyClaimed` when another broker of this process owns one of them.
    func claim(_ queues: [String]) throws {
        try hub.registry.claim(queues, by: brokerID)
    }

    /// Delivers every change committed from now on to `listener`.
    func listen(_ listener: @escaping @Sendable ([TaskChange]) -> Void) {
        let id = hub.notifier.add(listener)
        let cancelled = state.withLock { state -> Bool in
            state.listener = id
            return state.cancelled
        }
        if cancelled { hub.notifier.remove(id) }
    }

    /// Gives everything back; calling it again does nothing.
    func cancel() async {
        let listener = state.withLock { state -> UInt64?? in
            guard !state.cancelled else { return .none }
            state.cancelled = true
            return .some(state.listener)
        }
        guard let listener else { return }
        if let listener { hub.notifier.remove(listener) }
        let freed = hub.registry.unregister(brokerID)
        // Brokers whose filters also accept these queues left them while this one owned them; their
        // stored actions announce no change, so they are told.
        if !freed.isEmpty { hub.notifier.notify([.unowned(queueNames: freed)]) }
        releaseLock?()
        if feeds { hub.releaseFeed() }
        await names?.unregisterBroker(name: claim.name)
    }
}

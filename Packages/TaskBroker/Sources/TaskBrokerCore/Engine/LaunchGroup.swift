import Synchronization

/// The outcomes of one launch's handlers that finish while the launch is still starting the
/// others. ``close()`` ends the collection: later outcomes go to the committer directly.
final class LaunchGroup: Sendable {
    private let state = Mutex<(isOpen: Bool, items: [BrokerOutcome])>((true, []))

    /// Keeps `finished` for the launch's one hand-over; `false` once the group is closed.
    func collect(_ finished: BrokerOutcome) -> Bool {
        state.withLock { state in
            guard state.isOpen else { return false }
            state.items.append(finished)
            return true
        }
    }

    /// Closes the group and returns what it collected.
    func close() -> [BrokerOutcome] {
        state.withLock { state in
            state.isOpen = false
            defer { state.items = [] }
            return state.items
        }
    }
}

import Dispatch
import Synchronization

/// A queue that a dedicated thread drains by blocking (for the SQLite committer thread).
final class BlockingQueue<Item: Sendable>: Sendable {
    private let state = Mutex<(items: [Item], closed: Bool)>(([], false))
    private let wakeups = DispatchSemaphore(value: 0)

    /// Adds items; wakes the thread if the queue was empty.
    ///
    /// - Returns: `false` after ``close()``: the items were dropped.
    @discardableResult
    func push(contentsOf items: [Item]) -> Bool {
        guard !items.isEmpty else { return true }
        let (accepted, wasEmpty) = state.withLock { state -> (Bool, Bool) in
            guard !state.closed else { return (false, false) }
            let wasEmpty = state.items.isEmpty
            state.items.append(contentsOf: items)
            return (true, wasEmpty)
        }
        if wasEmpty { wakeups.signal() }
        return accepted
    }

    /// Blocks until there are items, then takes them all; once closed, returns what is left and
    /// then `nil`. Only for a thread of its own, never Swift's cooperative pool.
    func popAll() -> [Item]? {
        while true {
            let taken = state.withLock { state -> [Item]?? in
                if !state.items.isEmpty {
                    defer { state.items = [] }
                    return .some(state.items)
                }
                if state.closed { return .some(nil) }
                return .none
            }
            if let taken { return taken }
            wakeups.wait()
        }
    }

    /// Accepts no more items; the thread takes what is left, then gets `nil`.
    func close() {
        state.withLock { $0.closed = true }
        wakeups.signal()
    }
}

import Synchronization

/// An unbounded single-consumer inbox: producers post from any thread; the consumer takes
/// everything posted so far in one go, which is how completions of different queues end up
/// in one commit.
final class Mailbox<Item: Sendable>: Sendable {
    private struct State {
        var items: [Item] = []
        var waiter: CheckedContinuation<[Item]?, Never>?
        var closed = false
    }

    private let state = Mutex(State())

    /// Adds an item and wakes the consumer.
    ///
    /// - Returns: `false` after ``close()``: the item was dropped.
    @discardableResult
    func post(_ item: Item) -> Bool {
        post(contentsOf: [item])
    }

    /// Adds items (the consumer takes them in one go) and wakes the consumer once.
    ///
    /// - Returns: `false` after ``close()``: the items were dropped.
    @discardableResult
    func post(contentsOf items: [Item]) -> Bool {
        guard !items.isEmpty else { return true }
        let (accepted, waiter) = state.withLock { state -> (Bool, CheckedContinuation<[Item]?, Never>?) in
            guard !state.closed else { return (false, nil) }
            if let waiter = state.waiter {
                state.waiter = nil
                return (true, waiter)
            }
            state.items.append(contentsOf: items)
            return (true, nil)
        }
        waiter?.resume(returning: items)
        return accepted
    }

    /// Everything posted so far, waiting if there is nothing; `nil` once closed.
    func next() async -> [Item]? {
        await withCheckedContinuation { (continuation: CheckedContinuation<[Item]?, Never>) in
            let ready = state.withLock { state -> [Item]?? in
                if !state.items.isEmpty {
                    defer { state.items = [] }
                    return .some(state.items)
                }
                if state.closed { return .some(nil) }
                state.waiter = continuation
                return .none
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Stops accepting items. The consumer still takes what was posted before, then gets `nil`.
    func close() {
        let waiter = state.withLock { state -> CheckedContinuation<[Item]?, Never>? in
            state.closed = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }
}

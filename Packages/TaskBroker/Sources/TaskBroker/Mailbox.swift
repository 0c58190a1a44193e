import Dispatch
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

    /// Adds an item and wakes the consumer. Dropped after ``close()``.
    func post(_ item: Item) {
        post(contentsOf: [item])
    }

    /// Adds items (the consumer takes them in one go) and wakes the consumer once. Dropped after
    /// ``close()``.
    func post(contentsOf items: [Item]) {
        guard !items.isEmpty else { return }
        let waiter = state.withLock { state -> CheckedContinuation<[Item]?, Never>? in
            guard !state.closed else { return nil }
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.items.append(contentsOf: items)
            return nil
        }
        waiter?.resume(returning: items)
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

    /// Stops accepting items; the consumer's next call returns `nil`.
    func close() {
        let waiter = state.withLock { state -> CheckedContinuation<[Item]?, Never>? in
            state.closed = true
            state.items = []
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }
}

/// A one-way gate: ``wait()`` returns once ``open()`` has been called.
final class Latch: Sendable {
    private struct State {
        var isOpen = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    var isOpen: Bool { state.withLock { $0.isOpen } }

    func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.isOpen = true
            defer { state.waiters = [] }
            return state.waiters
        }
        waiters.forEach { $0.resume() }
    }

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let open = state.withLock { state -> Bool in
                if state.isOpen { return true }
                state.waiters.append(continuation)
                return false
            }
            if open { continuation.resume() }
        }
    }
}

/// A queue that a dedicated thread drains by blocking (for the SQLite committer thread).
final class BlockingQueue<Item: Sendable>: Sendable {
    private let state = Mutex<(items: [Item], closed: Bool)>(([], false))
    private let wakeups = DispatchSemaphore(value: 0)

    /// Adds items; wakes the thread if the queue was empty.
    func push(contentsOf items: [Item]) {
        guard !items.isEmpty else { return }
        let wasEmpty = state.withLock { state -> Bool in
            guard !state.closed else { return false }
            let wasEmpty = state.items.isEmpty
            state.items.append(contentsOf: items)
            return wasEmpty
        }
        if wasEmpty { wakeups.signal() }
    }

    /// Blocks until there are items, then takes them all; `nil` once closed.
    func popAll() -> [Item]? {
        while true {
            let taken = state.withLock { state -> [Item]?? in
                if state.closed { return .some(nil) }
                if state.items.isEmpty { return .none }
                defer { state.items = [] }
                return .some(state.items)
            }
            if let taken { return taken }
            wakeups.wait()
        }
    }

    /// Wakes the thread for good.
    func close() {
        state.withLock { $0.closed = true }
        wakeups.signal()
    }
}

/// The outcomes of one launch's handlers that finish while the launch is still starting the
/// others. ``close()`` ends the collection: later outcomes go to the committer directly.
final class LaunchGroup: Sendable {
    private let state = Mutex<(isOpen: Bool, items: [BrokerFinished])>((true, []))

    /// Keeps `finished` for the launch's one hand-over; `false` once the group is closed.
    func collect(_ finished: BrokerFinished) -> Bool {
        state.withLock { state in
            guard state.isOpen else { return false }
            state.items.append(finished)
            return true
        }
    }

    /// Closes the group and returns what it collected.
    func close() -> [BrokerFinished] {
        state.withLock { state in
            state.isOpen = false
            defer { state.items = [] }
            return state.items
        }
    }
}

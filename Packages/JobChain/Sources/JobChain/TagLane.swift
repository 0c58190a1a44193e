import Dispatch

/// A custom tagged queue: runs the work submitted to it one item at a time, in submission
/// order, even when an item finishes later (an `async` command holds the lane until it ends).
final class TagLane: Sendable {
    /// One unit of work; it calls the `done` it is given exactly once when it has finished.
    typealias Item = @Sendable (_ done: @escaping @Sendable () -> Void) -> Void

    private struct State {
        var busy = false
        var pending: [Item] = []
        var head = 0
    }

    let tag: String
    let priority: DispatchQoS.QoSClass
    let queue: DispatchQueue
    private let state = Locked(State())

    init(tag: String, priority: DispatchQoS.QoSClass) {
        self.tag = tag
        self.priority = priority
        self.queue = DispatchQueue.global(qos: priority)
    }

    /// Runs `item` after every item submitted before it has finished.
    func submit(_ item: @escaping Item) {
        let runNow = state.withLock { state -> Bool in
            if state.busy {
                state.pending.append(item)
                return false
            }
            state.busy = true
            return true
        }
        if runNow { start(item) }
    }

    private func start(_ item: @escaping Item) {
        item { self.next() }
    }

    private func next() {
        let item = state.withLock { state -> Item? in
            guard state.head < state.pending.count else {
                state.pending.removeAll(keepingCapacity: true)
                state.head = 0
                state.busy = false
                return nil
            }
            let item = state.pending[state.head]
            state.head += 1
            if state.head >= 64, state.head * 2 >= state.pending.count {
                state.pending.removeFirst(state.head)
                state.head = 0
            }
            return item
        }
        if let item { start(item) }
    }
}

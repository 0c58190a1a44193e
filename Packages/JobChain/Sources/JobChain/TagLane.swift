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

    /// Runs `item`, then the items after it. An item that calls `done` before it returns (a
    /// command cancelled or suspended while it waited for the lane) hands the lane on in this
    /// loop, not by calling the next item from inside its `done`: thousands of such items in a
    /// row (a job suspended and resumed over and over while another held the tag) recursed
    /// once each and overflowed the stack.
    private func start(_ first: @escaping Item) {
        var current: Item? = first
        while let item = current {
            current = nil
            let handOff = HandOff()
            item {
                // Called after `item` returned: nothing loops any more, so hand the lane on here.
                if !handOff.finishedInline() { self.next() }
            }
            if handOff.returned() { current = takeNext() }
        }
    }

    private func next() {
        if let item = takeNext() { start(item) }
    }

    /// The next pending item, or `nil` (the lane is then idle).
    private func takeNext() -> Item? {
        state.withLock { state -> Item? in
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
    }

    /// Which came first for one item: its `done`, or its return to ``start(_:)``.
    private final class HandOff: Sendable {
        private enum Step { case running, doneInline, returned }
        private let step = Locked(Step.running)

        /// `done` was called; `true` if the item had not returned yet (the loop goes on).
        func finishedInline() -> Bool {
            step.withLock { step in
                guard step == .running else { return false }
                step = .doneInline
                return true
            }
        }

        /// The item returned; `true` if it had called `done` already (the loop takes the next).
        func returned() -> Bool {
            step.withLock { step in
                guard step == .running else { return true }
                step = .returned
                return false
            }
        }
    }
}

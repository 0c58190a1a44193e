import Synchronization

/// The running handlers of a broker, so that a shutdown that runs out of time can cancel them.
///
/// Handlers run in tasks of their own rather than as children of the engine's task group: a
/// handler that ignores cancellation must not keep ``TaskQueueBroker/shutdown()`` waiting past its
/// timeout. The broker cancels them and ignores what they return afterwards.
final class HandlerTasks: Sendable {
    private struct State {
        var tasks: [UInt64: Task<Void, Never>] = [:]
        /// Handlers that finished before their task was registered.
        var finishedEarly: Set<UInt64> = []
        var nextID: UInt64 = 0
        var cancelled = false
    }

    private let state = Mutex(State())

    /// Runs `body` in a new task that starts at once on the calling thread and goes on by itself at
    /// its first suspension (so one launch wakes one thread, not one per action).
    ///
    /// - Returns: `false` after ``cancelAll()``: nothing was started.
    @discardableResult
    func start(_ body: sending @escaping () async -> Void) -> Bool {
        let id = state.withLock { state -> UInt64? in
            guard !state.cancelled else { return nil }
            state.nextID += 1
            return state.nextID
        }
        guard let id else { return false }
        let task = Task.immediate {
            await body()
            self.finished(id)
        }
        let cancelNow = state.withLock { state -> Bool in
            if state.finishedEarly.remove(id) != nil { return false }
            state.tasks[id] = task
            return state.cancelled
        }
        if cancelNow { task.cancel() }
        return true
    }

    /// Cancels every running handler; no handler starts after this.
    func cancelAll() {
        let tasks = state.withLock { state -> [Task<Void, Never>] in
            state.cancelled = true
            defer { state.tasks = [:] }
            return Array(state.tasks.values)
        }
        for task in tasks {
            task.cancel()
        }
    }

    private func finished(_ id: UInt64) {
        state.withLock { state in
            if state.tasks.removeValue(forKey: id) == nil {
                state.finishedEarly.insert(id)
            }
        }
    }
}

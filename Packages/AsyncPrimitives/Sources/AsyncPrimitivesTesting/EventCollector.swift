import Synchronization

/// Collects values that arrive from other threads and lets a test await a number of them.
///
/// Hand ``record(_:)`` to the callback under test, then `await collector.values(count: 3)`:
/// it returns as soon as three values have arrived, without sleeping or polling.
///
/// ```swift
/// let events = EventCollector<JobQueueEvent>()
/// let token = queue.observe { _, _, event in events.record(event) }
/// queue.add(jobs)
/// #expect(await events.values(count: 1) == [.added])
/// ```
public final class EventCollector<Element: Sendable>: Sendable {
    private struct Waiter {
        let id: UInt64
        let count: Int
        let continuation: CheckedContinuation<[Element], Never>
    }

    private struct State {
        var values: [Element] = []
        var waiters: [Waiter] = []
        var nextID: UInt64 = 0
        /// Waiters cancelled before their continuation was stored.
        var cancelledEarly: Set<UInt64> = []
    }

    private let state = Mutex(State())

    /// Creates an empty collector.
    public init() {}

    /// Appends `value` and wakes every waiter whose count is now reached.
    public func record(_ value: Element) {
        let ready = state.withLock { state -> [(CheckedContinuation<[Element], Never>, [Element])] in
            state.values.append(value)
            let count = state.values.count
            let ready = state.waiters.filter { $0.count <= count }
            state.waiters.removeAll { $0.count <= count }
            return ready.map { ($0.continuation, Array(state.values.prefix($0.count))) }
        }
        for (continuation, values) in ready {
            continuation.resume(returning: values)
        }
    }

    /// Everything recorded so far, in arrival order.
    public var values: [Element] {
        state.withLock { $0.values }
    }

    /// The number of values recorded so far.
    public var count: Int {
        state.withLock { $0.values.count }
    }

    /// Waits until at least `count` values have been recorded.
    ///
    /// A cancelled wait (a test past its time limit, say) returns at once with what has
    /// arrived, fewer than `count` values, so that the test fails on them instead of hanging.
    ///
    /// - Returns: The first `count` values, in arrival order; fewer only when cancelled.
    public func values(count: Int) async -> [Element] {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<[Element], Never>) in
                let ready = state.withLock { state -> [Element]? in
                    if state.values.count >= count { return Array(state.values.prefix(count)) }
                    if state.cancelledEarly.remove(id) != nil { return state.values }
                    state.waiters.append(Waiter(id: id, count: count, continuation: continuation))
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let cancelled = state.withLock { state -> (CheckedContinuation<[Element], Never>, [Element])? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else {
                    state.cancelledEarly.insert(id)
                    return nil
                }
                return (state.waiters.remove(at: index).continuation, state.values)
            }
            if let (continuation, values) = cancelled { continuation.resume(returning: values) }
        }
    }
}

import Synchronization

/// Fans events out to every stream of ``TaskQueueBroker/events`` (or ``TaskScheduler/events``).
final class EventBroadcaster<Event: Sendable>: Sendable {
    private struct State {
        var subscribers: [UInt64: AsyncStream<Event>.Continuation] = [:]
        var nextID: UInt64 = 0
        var finished = false
    }

    private let state = Mutex(State())
    /// How many streams are open: events are not even built into a list while nobody listens.
    private let subscriberCount = Atomic<Int>(0)

    func stream() -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream<Event>.makeStream()
        let id = state.withLock { state -> UInt64? in
            guard !state.finished else { return nil }
            state.nextID += 1
            state.subscribers[state.nextID] = continuation
            subscriberCount.add(1, ordering: .relaxed)
            return state.nextID
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            if state.withLock({ $0.subscribers.removeValue(forKey: id) }) != nil {
                subscriberCount.subtract(1, ordering: .relaxed)
            }
        }
        return stream
    }

    func yield(_ event: Event) {
        guard subscriberCount.load(ordering: .relaxed) > 0 else { return }
        let subscribers = state.withLock { Array($0.subscribers.values) }
        for subscriber in subscribers {
            subscriber.yield(event)
        }
    }

    func finish() {
        let subscribers = state.withLock { state -> [AsyncStream<Event>.Continuation] in
            state.finished = true
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        subscribers.forEach { $0.finish() }
    }
}

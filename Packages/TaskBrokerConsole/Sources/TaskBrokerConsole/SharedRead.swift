import Synchronization

/// One read shared by every caller that needs a result no older than the moment it asks for: the
/// live counts of many open streams, woken by the same change, read the database once.
///
/// A caller asks with the moment it was woken. A read that started at or after that moment (under
/// way, or done and kept) answers it; otherwise a new read starts, and later callers join it.
final class SharedRead<Value: Sendable>: Sendable {
    private struct State {
        /// The read under way, and when it started.
        var flight: (started: ContinuousClock.Instant, task: Task<Value, any Error>)?
        /// The last read that succeeded, and when it started.
        var last: (started: ContinuousClock.Instant, value: Value)?
    }

    private let state = Mutex(State())
    private let read: @Sendable () async throws -> Value

    init(_ read: @escaping @Sendable () async throws -> Value) {
        self.read = read
    }

    /// A value read from a read that started no earlier than `moment`.
    func value(notOlderThan moment: ContinuousClock.Instant) async throws -> Value {
        let task = state.withLock { state -> Task<Value, any Error> in
            if let last = state.last, last.started >= moment {
                return Task { last.value }
            }
            if let flight = state.flight, flight.started >= moment {
                return flight.task
            }
            let started = ContinuousClock.now
            let read = self.read
            let task = Task<Value, any Error> { [weak self] in
                do {
                    let value = try await read()
                    self?.finish(started, .success(value))
                    return value
                } catch {
                    self?.finish(started, .failure(error))
                    throw error
                }
            }
            state.flight = (started, task)
            return task
        }
        return try await task.value
    }

    private func finish(_ started: ContinuousClock.Instant, _ result: Result<Value, any Error>) {
        state.withLock { state in
            if state.flight?.started == started { state.flight = nil }
            if case .success(let value) = result, state.last.map({ $0.started < started }) ?? true {
                state.last = (started, value)
            }
        }
    }
}

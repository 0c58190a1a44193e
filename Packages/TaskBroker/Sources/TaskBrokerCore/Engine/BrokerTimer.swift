import Synchronization

/// A timer of the engine: sleeps on the broker's clock in a child task of the engine's task group
/// until its delay passes or it is cancelled. Cancelling ends the sleep at once, so a cancelled
/// timer leaves no sleeper behind on the clock.
final class BrokerTimer: Sendable {
    private let state = Mutex<(cancelled: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    /// Cancels the timer: its ``sleep(using:)`` returns `false` now or as soon as it starts.
    func cancel() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.cancelled = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Sleeps through `sleep` (until the timer's deadline on the broker's clock).
    ///
    /// - Returns: `true` if the sleep ended, `false` if the timer (or the task) was cancelled first.
    func sleep(using sleep: @escaping @Sendable () async throws -> Void) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                do {
                    try await sleep()
                    return true
                } catch {
                    return false
                }
            }
            group.addTask {
                await withTaskCancellationHandler {
                    await self.cancelled()
                } onCancel: {
                    self.cancel()
                }
                return false
            }
            let fired = await group.next() ?? false
            group.cancelAll()
            return fired
        }
    }

    private func cancelled() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let isCancelled = state.withLock { state -> Bool in
                if state.cancelled { return true }
                state.waiter = continuation
                return false
            }
            if isCancelled { continuation.resume() }
        }
    }
}

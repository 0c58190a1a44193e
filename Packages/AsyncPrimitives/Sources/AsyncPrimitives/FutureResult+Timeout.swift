public import Foundation

extension FutureResult {
    /// Fails with a timeout error unless this future is filled within `interval` seconds.
    ///
    /// When the interval passes first, the returned future fails with an
    /// ``AsyncPrimitivesError`` whose code is ``AsyncPrimitivesError/Code/timedOut``; a result
    /// that arrives later is ignored. When this future is filled first, the returned future
    /// holds its result and the timer is cancelled.
    ///
    /// - Parameters:
    ///   - interval: How long to wait, in seconds. Any value is accepted and clamped with
    ///     `Duration.clamping(seconds:)`: NaN or negative times out at once; infinity, or
    ///     `Duration.clampingLimit` or more, never times out, and starts no timer (a timer
    ///     would keep the returned future and its handlers for 31 years if this future were
    ///     dropped unfilled).
    ///   - clock: The clock that measures the interval. Tests pass a manual clock.
    /// - Returns: A future with this future's result or the timeout error.
    public func timeoutAfter(
        interval: TimeInterval,
        clock: some Clock<Duration> = ContinuousClock()
    ) -> FutureResult<Value> {
        let next = FutureResult<Value>()
        let duration = Duration.clamping(seconds: interval)
        guard duration < .clampingLimit else {
            observe(Callback(queue: nil) { _ = next.complete($0) })
            return next
        }
        let timer = Task {
            try await clock.sleep(for: duration)
            _ = next.complete(.failure(AsyncPrimitivesError(
                code: .timedOut,
                message: "The future was not filled within \(interval) seconds; "
                    + "the operation may still be running. Retry, or allow a longer interval."
            )))
        }
        observe(Callback(queue: nil) { result in
            timer.cancel()
            _ = next.complete(result)
        })
        return next
    }
}

extension Duration {
    /// The longest duration QueueKit's timers use: 1,000,000,000 seconds (about 31.7 years).
    ///
    /// Every API that takes a number of seconds as a `TimeInterval` or `Double` clamps it to
    /// `0 ... clampingLimit` with ``clamping(seconds:)``, so that no timer, however it is later
    /// converted (to nanoseconds in an `Int64`, to a `DispatchTime`), can overflow.
    public static var clampingLimit: Duration { .seconds(1_000_000_000) }

    /// A duration of `seconds`, clamped to `0 ... clampingLimit` instead of trapping.
    ///
    /// `Duration.seconds(_: Double)` traps on infinity, NaN and values past about 1.7e20; this
    /// never does. QueueKit's one policy for durations given in seconds:
    /// - NaN and negative values (including `-infinity`) become `.zero`: no wait.
    /// - Values above ``clampingLimit`` (including `+infinity` and `1e30`) become
    ///   ``clampingLimit``: in practice, never.
    /// - Every other value converts as `.seconds(seconds)` does.
    ///
    /// ```swift
    /// Duration.clamping(seconds: .infinity) == .clampingLimit   // true
    /// Duration.clamping(seconds: -1) == .zero                    // true
    /// ```
    /// - Parameter seconds: Any number of seconds.
    /// - Returns: The clamped duration.
    public static func clamping(seconds: Double) -> Duration {
        guard seconds > 0 else { return .zero } // NaN and negatives (NaN compares false).
        guard seconds < 1_000_000_000 else { return clampingLimit }
        return .seconds(seconds)
    }

    /// `duration`, clamped to `0 ... clampingLimit`.
    ///
    /// The same policy as ``clamping(seconds:)`` for a value that is already a `Duration`
    /// (`.milliseconds(Int.max)`, say): negative becomes `.zero`, above the limit becomes
    /// ``clampingLimit``.
    /// - Parameter duration: Any duration.
    /// - Returns: The clamped duration.
    public static func clamping(_ duration: Duration) -> Duration {
        min(max(duration, .zero), clampingLimit)
    }
}

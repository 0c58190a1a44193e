import AsyncPrimitives
import PropertyBased
import QueueRetry
import Testing

/// `Backoff` for any input: random durations (negative, zero, past the clamping limit), any
/// jitter (NaN and the infinities included) and any failure count. A failing case prints its
/// input and a seed to replay it with `.fixedSeed(…)`.
@Suite(.timeLimit(.minutes(1)))
struct BackoffPropertyTests {
    /// Seconds from far below zero to far past `Duration.clampingLimit` (10^9 s).
    static let seconds = Gen.int64(in: -4_000_000_000...4_000_000_000)
    /// A fraction of a second, in attoseconds.
    static let fraction = Gen.int64(in: 0...999_999_999_999_999_999)
    /// Jitter: a plain fraction, or one of the values a careless caller passes.
    static let jitter = Gen.int(in: 0...9).map { pick -> Double in
        [Double.nan, .infinity, -.infinity, -1, 0, 1, 2, 1e-300, 0.5, 0.25][pick]
    }

    static func duration(_ seconds: Int64, _ attoseconds: Int64) -> Duration {
        Duration(secondsComponent: seconds, attosecondsComponent: attoseconds)
    }

    @Test func everyDelayLiesBetweenZeroAndTheClampedCap() async {
        await propertyCheck(
            count: 500,
            input: Self.seconds, Self.fraction, Self.seconds, Self.jitter, Gen.int(in: .min ... .max)
        ) { initialSeconds, fraction, maximumSeconds, jitter, failures in
            let backoff = Backoff(
                initial: Self.duration(initialSeconds, fraction), maximum: .seconds(maximumSeconds), jitter: jitter
            )
            let delay = backoff.delay(afterFailures: failures)
            #expect(delay >= .zero)
            #expect(delay <= Duration.clampingLimit)
            #expect(delay <= backoff.maximum)
            #expect(backoff.jitter >= 0 && backoff.jitter <= 1)
            if failures < 1 { #expect(delay == .zero) }
            if failures == 1 { #expect(delay == backoff.initial) }
        }
    }

    @Test func delaysDoubleAndNeverShrinkAsFailuresGrow() async {
        await propertyCheck(
            count: 500, input: Self.seconds, Self.fraction, Self.seconds, Gen.int(in: 1...200)
        ) { initialSeconds, fraction, maximumSeconds, failures in
            let backoff = Backoff(initial: Self.duration(initialSeconds, fraction), maximum: .seconds(maximumSeconds))
            let now = backoff.delay(afterFailures: failures)
            let next = backoff.delay(afterFailures: failures + 1)
            #expect(next >= now)
            // Doubles until the cap, then stays at it.
            #expect(next == min(now * 2, backoff.maximum))
        }
    }

    @Test func jitterTakesOffAtMostItsFractionOfTheDelay() async {
        await propertyCheck(
            count: 500,
            input: Gen.int64(in: 0...100_000), Gen.double(in: 0...1), Gen.int(in: 1...40), Gen.uint64(in: .min ... .max)
        ) { initialMilliseconds, jitter, failures, seed in
            let backoff = Backoff(initial: .milliseconds(initialMilliseconds), maximum: .seconds(86_400), jitter: jitter)
            let full = backoff.delay(afterFailures: failures)
            var random = SeededRandom(state: seed)
            let delay = backoff.delay(afterFailures: failures, using: &random)
            #expect(delay <= full)
            // The floor, with a nanosecond of slack for the Double arithmetic of the jitter.
            #expect(delay >= full * (1 - jitter) - .nanoseconds(1))
        }
    }
}

import AsyncPrimitives
import AsyncPrimitivesTesting
import Logging
import QueueCore
import QueueCoreTesting
import QueueRetry
import Testing

@Suite(.timeLimit(.minutes(1)))
struct HaltRetryStrategyTests {
    @Test
    func aFailureStopsTheQueueWithTheJobBackAtTheFront() async {
        let queue = JobQueue(handling: CuteJob.self, name: "halt")
        let persister = MemoryPersister()
        queue.persister = AnyJobPersister(persister)
        queue.retryStrategy = HaltRetryStrategy()
        let processor = ScriptedProcessor { job, attempt in job.action == "a" && attempt == 1 }
        queue.processor = AnyJobProcessor(processor)
        let failed = EventCollector<String>()
        let token = queue.observe { _, jobs, event in
            if event == .failedToProcess { jobs.forEach { failed.record($0.action) } }
        }
        queue.add([makeJob("a"), makeJob("b")])
        queue.start()

        #expect(await failed.values(count: 1) == ["a"])
        #expect(queue.state == .stopped)
        #expect(queue.peek()?.action == "a")
        #expect(queue.count == 2)
        #expect(persister.actions == ["a", "b"])

        queue.start()
        #expect(await processor.attempts.values(count: 3) == ["a@0", "a@0", "b@0"])
        withExtendedLifetime(token) {}
    }
}

@Suite(.timeLimit(.minutes(1)))
struct MaxRetryStrategyTests {
    @Test
    func anAlwaysFailingJobFailsExactlyMaxAttemptsTimesThenThePurgedQueueIsEmpty() async {
        let queue = JobQueue(handling: CuteJob.self, name: "max")
        let persister = MemoryPersister()
        queue.persister = AnyJobPersister(persister)
        queue.retryStrategy = MaxRetryStrategy(maxAttempts: 5)
        let processor = ScriptedProcessor()
        queue.processor = AnyJobProcessor(processor)
        let failed = EventCollector<String>()
        let token = queue.observe { _, jobs, event in
            if event == .failedToProcess { jobs.forEach { failed.record($0.action) } }
        }
        queue.add([makeJob("a"), makeJob("b")])
        queue.start()

        let failures = await failed.values(count: 10)
        #expect(failures == Array(repeating: "a", count: 5) + Array(repeating: "b", count: 5))
        // When observers hear of the last failure, the purge is done and nothing is left to run.
        #expect(queue.count == 0)
        #expect(queue.state == .listening)
        #expect(persister.actions.isEmpty)
        #expect(processor.attempts.count == 10)
        withExtendedLifetime(token) {}
    }

    @Test
    func aJobThatSucceedsBeforeTheLimitIsProcessedOnce() async {
        let queue = JobQueue(handling: CuteJob.self, name: "max")
        queue.retryStrategy = MaxRetryStrategy(maxAttempts: 3)
        let processor = ScriptedProcessor { _, attempt in attempt < 3 }
        queue.processor = AnyJobProcessor(processor)
        let processed = EventCollector<String>()
        let token = queue.observe { _, jobs, event in
            if event == .processed { jobs.forEach { processed.record($0.action) } }
        }
        queue.add([makeJob("a"), makeJob("b")])
        queue.start()

        #expect(await processed.values(count: 2) == ["a", "b"])
        #expect(processor.attempts.values == ["a@0", "a@0", "a@0", "b@0", "b@0", "b@0"])
        withExtendedLifetime(token) {}
    }

    @Test
    func theDefaultMaxRetryStrategyGivesAJobFiveAttempts() async {
        // DESIGN.md spells the default `MaxRetryStrategy(maxAttempts: 5)`; `MaxRetryStrategy()` means it.
        #expect(MaxRetryStrategy().maxAttempts == 5)
        let queue = JobQueue(handling: CuteJob.self, name: "max-default")
        queue.retryStrategy = MaxRetryStrategy()
        let processor = ScriptedProcessor()
        queue.processor = AnyJobProcessor(processor)
        let failed = EventCollector<String>()
        let token = queue.observe { _, jobs, event in
            if event == .failedToProcess { jobs.forEach { failed.record($0.action) } }
        }
        queue.add([makeJob("a"), makeJob("b")])
        queue.start()

        let failures = await failed.values(count: 6)
        #expect(failures == Array(repeating: "a", count: 5) + ["b"])
        withExtendedLifetime(token) {}
    }

    @Test(arguments: [0, 1])
    func maxAttemptsOfOneOrLessNeverRetries(maxAttempts: Int) async {
        let queue = JobQueue(handling: CuteJob.self, name: "max")
        queue.retryStrategy = MaxRetryStrategy(maxAttempts: maxAttempts)
        #expect(MaxRetryStrategy(maxAttempts: maxAttempts).maxAttempts == 1)
        let processor = ScriptedProcessor()
        queue.processor = AnyJobProcessor(processor)
        let failed = EventCollector<String>()
        let token = queue.observe { _, jobs, event in
            if event == .failedToProcess { jobs.forEach { failed.record($0.action) } }
        }
        queue.add([makeJob("a"), makeJob("b")])
        queue.start()
        #expect(await failed.values(count: 2) == ["a", "b"])
        #expect(queue.count == 0)
        withExtendedLifetime(token) {}
    }
}

@Suite(.timeLimit(.minutes(1)))
struct BackoffRetryStrategyTests {
    @Test
    func backoffDoublesFromOneSecondUpToTheCapWithoutSleepingAndNeverPurges() async {
        let clock = ManualClock()
        let queue = JobQueue(handling: CuteJob.self, name: "backoff")
        let persister = MemoryPersister()
        queue.persister = AnyJobPersister(persister)
        let strategy = BackoffRetryStrategy(initialBackoff: 1, maxBackoff: 8, clock: clock)
        queue.retryStrategy = strategy
        let processor = ScriptedProcessor(clock: clock)
        queue.processor = AnyJobProcessor(processor)
        let failures = EventCollector<String>()
        let token = queue.observe { _, jobs, event in
            if event == .failedToProcess { jobs.forEach { failures.record($0.action) } }
        }
        queue.add([makeJob("a")])
        queue.start()

        var expected = ["a@0"]
        #expect(await processor.attempts.values(count: 1) == expected)
        var now = 0
        for delay in [1, 2, 4, 8, 8, 8] {
            // Observers hear of the failure once the strategy has stopped the queue.
            _ = await failures.values(count: expected.count)
            await clock.sleepers(atLeast: 1)
            #expect(queue.state == .stopped)
            #expect(queue.peek()?.action == "a")
            // Not a moment early…
            clock.advance(by: .seconds(delay) - .milliseconds(1))
            #expect(clock.sleeperCount == 1)
            #expect(processor.attempts.count == expected.count)
            // …and at the exact second.
            clock.advance(by: .milliseconds(1))
            now += delay
            expected.append("a@\(now)")
            #expect(await processor.attempts.values(count: expected.count) == expected)
        }
        #expect(expected == ["a@0", "a@1", "a@3", "a@7", "a@15", "a@23", "a@31"])
        await clock.sleepers(atLeast: 1)
        #expect(persister.actions == ["a"])
        #expect(queue.count == 1)
        withExtendedLifetime(token) {}
    }

    /// The queue's owner stops it during the backoff (the app is going to the background, say):
    /// the strategy's restart must not start it again behind the owner's back. Before, it did.
    @Test
    func aQueueItsOwnerStopsDuringTheBackoffStaysStopped() async {
        let clock = ManualClock()
        let queue = JobQueue(handling: CuteJob.self, name: "backoff")
        let skipped = EventCollector<String>()
        queue.logger = Logger(label: "test", factory: { _ in CollectingLogHandler(messages: skipped, filter: "not restarted") })
        queue.retryStrategy = BackoffRetryStrategy(initialBackoff: 1, maxBackoff: 8, clock: clock)
        let processor = ScriptedProcessor(clock: clock)
        queue.processor = AnyJobProcessor(processor)
        queue.add([makeJob("a")])
        queue.start()
        #expect(await processor.attempts.values(count: 1) == ["a@0"])
        await clock.sleepers(atLeast: 1)
        queue.stop()
        clock.advance(by: .seconds(1))
        #expect(await skipped.values(count: 1).count == 1)
        #expect(queue.state == .stopped)
        #expect(processor.attempts.values == ["a@0"])
        // The owner's own start runs the job again, and the backoff goes on from there.
        clock.advance(by: .seconds(4))
        queue.start()
        #expect(await processor.attempts.values(count: 2) == ["a@0", "a@5"])
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(2))
        #expect(await processor.attempts.values(count: 3) == ["a@0", "a@5", "a@7"])
    }

    /// The owner starts the queue during the backoff: it runs at once, and the strategy's later
    /// restart changes nothing.
    @Test
    func aQueueItsOwnerStartsDuringTheBackoffRunsAtOnce() async {
        let clock = ManualClock()
        let queue = JobQueue(handling: CuteJob.self, name: "backoff")
        queue.retryStrategy = BackoffRetryStrategy(initialBackoff: 4, maxBackoff: 8, clock: clock)
        let processor = ScriptedProcessor(clock: clock) { _, attempt in attempt == 1 }
        queue.processor = AnyJobProcessor(processor)
        queue.add([makeJob("a")])
        queue.start()
        #expect(await processor.attempts.values(count: 1) == ["a@0"])
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(1))
        queue.start()
        #expect(await processor.attempts.values(count: 2) == ["a@0", "a@1"])
    }

    @Test
    func aDifferentJobFailingResetsTheBackoff() async {
        let clock = ManualClock()
        let queue = JobQueue(handling: CuteJob.self, name: "backoff")
        let strategy = BackoffRetryStrategy(clock: clock)
        queue.retryStrategy = strategy
        // "a" fails twice then succeeds; "b" always fails.
        let processor = ScriptedProcessor(clock: clock) { job, attempt in job.action == "b" || attempt <= 2 }
        queue.processor = AnyJobProcessor(processor)
        queue.add([makeJob("a"), makeJob("b")])
        queue.start()

        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(1))
        await clock.sleepers(atLeast: 1)
        #expect(strategy.nextBackoff == .seconds(4))
        clock.advance(by: .seconds(2))
        // "a" succeeds at 3 s, "b" fails at once: its first backoff is 1 s again, not 4 s.
        #expect(await processor.attempts.values(count: 4) == ["a@0", "a@1", "a@3", "b@3"])
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(1))
        #expect(await processor.attempts.values(count: 5) == ["a@0", "a@1", "a@3", "b@3", "b@4"])
        // …and then doubles for "b" as it did for "a".
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(2))
        #expect(await processor.attempts.values(count: 6) == ["a@0", "a@1", "a@3", "b@3", "b@4", "b@6"])
    }

    @Test
    func jitterFromTheInjectedSourceShortensTheWait() async {
        let clock = ManualClock()
        let queue = JobQueue(handling: CuteJob.self, name: "jitter")
        queue.retryStrategy = BackoffRetryStrategy(
            initialBackoff: 1, maxBackoff: 60, jitter: 0.5, clock: clock, randomSource: FixedRandom(value: .max)
        )
        let processor = ScriptedProcessor(clock: clock) { _, attempt in attempt == 1 }
        queue.processor = AnyJobProcessor(processor)
        queue.add([makeJob("a")])
        queue.start()

        await clock.sleepers(atLeast: 1)
        // The largest jitter takes half the second off.
        clock.advance(by: .milliseconds(500))
        #expect(await processor.attempts.values(count: 2) == ["a@0", "a@0.500"])
    }

    @Test
    func theSeedsSpellingCompiles() {
        let strategy = BackoffRetryStrategy(maxBackoff: 60*60)
        #expect(strategy.backoff.maximum == .seconds(3600))
        #expect(strategy.backoff.initial == .seconds(1))
        #expect(strategy.backoff.jitter == 0)
        let queue = JobQueue(handling: CuteJob.self, name: "seed")
        queue.retryStrategy = BackoffRetryStrategy(maxBackoff: 60*60) // waits a max 1 hour
        #expect(queue.retryStrategy is BackoffRetryStrategy)
    }
}

@Suite(.timeLimit(.minutes(1)))
struct BackoffTests {
    @Test
    func delaysDoubleAndStopAtTheCap() {
        let backoff = Backoff(initial: .seconds(1), maximum: .seconds(10))
        #expect((0...6).map { backoff.delay(afterFailures: $0) } == [
            .zero, .seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(10), .seconds(10),
        ])
    }

    @Test
    func jitterStaysWithinItsFraction() {
        let backoff = Backoff(initial: .seconds(4), maximum: .seconds(4), jitter: 0.25)
        var random = SeededRandom(state: 42)
        let delays = (0..<200).map { _ in backoff.delay(afterFailures: 1, using: &random) }
        #expect(delays.allSatisfy { $0 >= .seconds(3) && $0 <= .seconds(4) })
        #expect(Set(delays).count > 100, "jitter should spread the delays")
        var low = FixedRandom(value: .max)
        let shortest = backoff.delay(afterFailures: 1, using: &low)
        #expect(shortest >= .seconds(3) && shortest < .seconds(3.01))
        #expect(Backoff(initial: .seconds(4), maximum: .seconds(4)).delay(afterFailures: 1, using: &random) == .seconds(4))
    }
}

/// Any number of seconds is accepted and clamped with `Duration.clamping(seconds:)`; before,
/// `maxBackoff: 1e30` passed the `isFinite` check and trapped in `Duration.seconds(_:)`.
@Suite(.timeLimit(.minutes(1)))
struct BackoffClampingTests {
    @Test(arguments: [Double.infinity, .nan, -1, 1e30])
    func backoffRetryStrategyClampsAnyNumberOfSecondsAndStillRetries(_ seconds: Double) async {
        let clock = ManualClock()
        let strategy = BackoffRetryStrategy(initialBackoff: seconds, maxBackoff: seconds, clock: clock)
        let expected = Duration.clamping(seconds: seconds)
        #expect(strategy.backoff.initial == expected)
        #expect(strategy.backoff.maximum == expected)
        #expect(strategy.nextBackoff == expected)

        // A failing job waits exactly the clamped delay, then runs again.
        let queue = JobQueue(handling: CuteJob.self, name: "clamped")
        queue.retryStrategy = strategy
        let processor = ScriptedProcessor(clock: clock, shouldFail: { _, attempt in attempt == 1 })
        queue.processor = AnyJobProcessor(processor)
        queue.add([makeJob("a")])
        queue.start()
        #expect(await processor.attempts.values(count: 1) == ["a@0"])
        if expected > .zero {
            await clock.sleepers(atLeast: 1)
            clock.advance(by: expected - .seconds(1))
            #expect(queue.state == .stopped)
            clock.advance(by: .seconds(1))
        }
        let attempts = await processor.attempts.values(count: 2)
        #expect(attempts.count == 2)
        #expect(attempts.last?.hasPrefix("a@") == true)
    }

    @Test(arguments: [Double.infinity, .nan, -1, 1e30, 0.5])
    func jitterOfAnyValueStaysWithinZeroAndOne(_ jitter: Double) {
        let strategy = BackoffRetryStrategy(jitter: jitter)
        #expect(strategy.backoff.jitter == (jitter > 0 ? min(jitter, 1) : 0))
        let backoff = Backoff(initial: .seconds(4), maximum: .seconds(4), jitter: jitter)
        var random = SeededRandom(state: 7)
        let delay = backoff.delay(afterFailures: 1, using: &random)
        #expect(delay >= .zero && delay <= .seconds(4))
    }

    @Test func backoffClampsDurationsPastTheLimitAndBelowZero() {
        let huge = Backoff(initial: .seconds(Int64.max), maximum: .seconds(Int64.max), jitter: 0.5)
        #expect(huge.initial == .clampingLimit)
        #expect(huge.maximum == .clampingLimit)
        var random = SeededRandom(state: 1)
        let delay = huge.delay(afterFailures: 500, using: &random)
        #expect(delay >= .clampingLimit / 2 && delay <= .clampingLimit)
        let negative = Backoff(initial: .seconds(-1), maximum: .seconds(-5))
        #expect(negative.delay(afterFailures: 3) == .zero)
        // A value set after init obeys the same policy.
        var edited = Backoff()
        edited.maximum = .seconds(Int64.max)
        #expect(edited.delay(afterFailures: 200) == .clampingLimit)
    }

    @Test func aZeroInitialDelayWithAPositiveCapReturnsAtOnceForAnyFailureCount() {
        // The doubling loop once spun `failures - 1` times when the initial delay was zero.
        #expect(Backoff(initial: .zero, maximum: .seconds(1)).delay(afterFailures: Int.max) == .zero)
    }
}

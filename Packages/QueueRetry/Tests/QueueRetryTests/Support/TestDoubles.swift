import AsyncPrimitivesTesting
import Foundation
import Logging
import QueueCore
import QueueCoreTesting
import Synchronization

// `CuteJob`, the seed's base job, comes from QueueCoreTesting, shared by every package's tests.

/// A job whose action is `action`.
func makeJob(_ action: String) -> CuteJob {
    var job = CuteJob()
    job.action = action
    return job
}

struct TestFailure: Error {}

/// Fails a job while `shouldFail` says so, and records each attempt as
/// "<action>@<seconds on the clock>".
final class ScriptedProcessor: JobProcessor, Sendable {
    let attempts = EventCollector<String>()
    private let clock: ManualClock
    private let shouldFail: @Sendable (CuteJob, Int) -> Bool
    private let counts = Mutex<[String: Int]>([:])

    init(clock: ManualClock = ManualClock(), shouldFail: @escaping @Sendable (CuteJob, Int) -> Bool = { _, _ in true }) {
        self.clock = clock
        self.shouldFail = shouldFail
    }

    func processJob(_ job: CuteJob, completion: @escaping @Sendable (CuteJob, (any Error)?) -> Void) {
        let attempt = counts.withLock { counts -> Int in
            counts[job.action, default: 0] += 1
            return counts[job.action, default: 0]
        }
        let seconds = clock.now.offset.components.seconds
        let millis = clock.now.offset.components.attoseconds / 1_000_000_000_000_000
        attempts.record(millis == 0 ? "\(job.action)@\(seconds)" : "\(job.action)@\(seconds).\(millis)")
        completion(job, shouldFail(job, attempt) ? TestFailure() : nil)
    }
}

/// An in-memory persister, enough to see what a strategy left stored.
final class MemoryPersister: JobPersister, Sendable {
    private let stored = Mutex<[CuteJob]>([])

    var actions: [String] { stored.withLock { $0.map(\.action) } }

    func persist(_ jobs: [CuteJob]) throws {
        stored.withLock { stored in
            for job in jobs where !stored.contains(where: { $0.id == job.id }) {
                stored.append(job)
            }
        }
    }

    func delete(_ job: CuteJob) throws {
        stored.withLock { $0.removeAll { $0.id == job.id } }
    }

    func load() throws -> [CuteJob] {
        stored.withLock { $0 }
    }

    func clear(completion: (@Sendable ((any Error)?) -> Void)?) {
        stored.withLock { $0.removeAll() }
        completion?(nil)
    }
}

/// A random source that always returns the same bits.
struct FixedRandom: RandomNumberGenerator, Sendable {
    let value: UInt64

    mutating func next() -> UInt64 {
        value
    }
}

/// A seeded SplitMix64 generator: varied but repeatable draws.
struct SeededRandom: RandomNumberGenerator, Sendable {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A log handler that hands the messages containing `filter` to a collector, so a test can wait for one.
struct CollectingLogHandler: LogHandler {
    let messages: EventCollector<String>
    let filter: String
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let message = "\(event.message)"
        if message.contains(filter) { messages.record(message) }
    }
}

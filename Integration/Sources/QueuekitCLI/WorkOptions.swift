import ArgumentParser
import QueueRetry

/// The options of every command that runs uploads (`work`, `demo`): retries, backoff,
/// simulated work time and how many queues run at once.
struct WorkOptions: ParsableArguments {
    @Option(help: "Attempts before an upload is dead-lettered.")
    var maxAttempts = 5

    @Option(help: "Milliseconds before the first retry; doubles each time, up to --max-backoff-ms.")
    var backoffMs = 20

    @Option(help: "Longest delay between retries, in milliseconds.")
    var maxBackoffMs = 500

    @Option(help: "Milliseconds an average simulated upload takes (at most an hour: 3600000).")
    var workMs = 2.0

    /// The longest `--work-ms`: an hour.
    static let maximumWorkMs = 3_600_000.0

    @Option(help: "How many user queues upload at the same time.")
    var concurrency = 16

    func validate() throws {
        guard maxAttempts >= 1, concurrency >= 1, backoffMs >= 0, maxBackoffMs >= 0, workMs >= 0 else {
            throw ValidationError("--max-attempts and --concurrency must be at least 1, and times cannot be negative.")
        }
        // `inf` and `1e300` parse as numbers; they used to trap when converted to a duration
        // (the QueuekitArgumentsFuzzer fuzz target crashed on them).
        guard workMs <= Self.maximumWorkMs else {
            throw ValidationError("--work-ms takes at most \(Int(Self.maximumWorkMs)) (an hour); got \(workMs).")
        }
    }

    /// The handler settings these options describe.
    /// - Parameter maxAttempts: The attempts before dead-lettering; the demo's stored workload
    ///   keeps the value it was created with.
    func settings(maxAttempts: Int) -> HandlerSettings {
        HandlerSettings(
            maxAttempts: maxAttempts,
            backoff: Backoff(initial: .milliseconds(backoffMs), maximum: .milliseconds(max(backoffMs, maxBackoffMs))),
            averageWork: .microseconds(Int64(workMs * 1000))
        )
    }

    /// The arguments of a `queuekit work` process with these options on `database`.
    func workerArguments(database: String) -> [String] {
        [
            "work", "--database", database,
            "--max-attempts", String(maxAttempts), "--backoff-ms", String(backoffMs),
            "--max-backoff-ms", String(maxBackoffMs), "--work-ms", String(workMs),
            "--concurrency", String(concurrency),
        ]
    }
}

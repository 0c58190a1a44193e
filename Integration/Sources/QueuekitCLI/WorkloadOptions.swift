import ArgumentParser

/// The options that describe the demo's workload (`demo`, `demo-cluster`).
struct WorkloadOptions: ParsableArguments {
    @Option(help: "How many uploads the workload has.")
    var actions = 10_000

    @Option(help: "How many users (one serial queue each).")
    var users = 50

    @Option(help: "Seed of the workload: the same seed gives the same uploads and failures.")
    var seed: UInt64 = 42

    @Option(help: "Share of uploads that fail a few times, then succeed.")
    var transientRate = 0.08

    @Option(help: "Share of uploads that always fail and end in a dead-letter queue.")
    var permanentRate = 0.002

    func validate() throws {
        guard actions >= 0, users >= 1 else {
            throw ValidationError("--actions cannot be negative and --users must be at least 1.")
        }
        guard (0...1).contains(transientRate), (0...1).contains(permanentRate) else {
            throw ValidationError("--transient-rate and --permanent-rate are shares between 0 and 1.")
        }
    }

    /// The workload these options describe.
    func workload(maxAttempts: Int) -> Workload {
        Workload(
            seed: seed, total: actions, users: users, transientRate: transientRate,
            permanentRate: permanentRate, maxAttempts: maxAttempts
        )
    }
}

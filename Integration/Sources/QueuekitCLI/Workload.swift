import Foundation
import TaskBroker

/// SplitMix64: a tiny seeded generator, so a workload is the same on every machine.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The demo's workload: `total` uploads spread over `users` queues, some failing a few times,
/// a few failing for good. Action `i` depends only on the seed and `i`, so an interrupted
/// enqueue resumes with exactly the actions it had not stored yet.
struct Workload: Sendable, Equatable {
    var seed: UInt64
    var total: Int
    var users: Int
    /// Share of uploads that fail 1 to `maxAttempts - 2` times before they succeed.
    var transientRate: Double
    /// Share of uploads that never succeed.
    var permanentRate: Double
    var maxAttempts: Int

    static let keyPrefix = "demo-"

    func action(at index: Int) -> UploadAction {
        var random = SplitMix64(seed: seed &+ UInt64(index) &* 0x2545_F491_4F6C_DD1D)
        let user = "user-\(pad(Int.random(in: 0..<users, using: &random), 2))"
        let roll = Double.random(in: 0..<1, using: &random)
        let permanent = roll < permanentRate
        let transient = !permanent && roll < permanentRate + transientRate
        let kinds = ["IMG", "VID", "DOC"]
        let kind = kinds[Int.random(in: 0..<kinds.count, using: &random)]
        return UploadAction(
            key: "\(Self.keyPrefix)\(pad(index, 6))",
            user: user,
            file: "\(kind)_\(pad(index % 10_000, 4)).\(kind == "IMG" ? "jpg" : kind == "VID" ? "mov" : "pdf")",
            bytes: Int.random(in: 20_000...8_000_000, using: &random),
            transientFailures: transient ? Int.random(in: 1...max(1, maxAttempts - 2), using: &random) : 0,
            failsPermanently: permanent
        )
    }
}

/// The demo's own row in the broker's database: which workload it is and how much of it is
/// enqueued. It is written in the same transaction as each batch of actions, so the two never
/// disagree after a crash.
struct DemoLedger: Sendable {
    var workload: Workload
    var enqueued: Int
    var purged: Int
    var runs: Int

    /// The ledger's counters.
    enum Counter: String, Sendable {
        case purged, runs
    }

    /// The stored ledger, if the database holds a demo.
    static func load(from store: Store) async throws -> DemoLedger? {
        try await store.run("read the demo's progress") { try await store.backend.loadLedger() }
    }

    /// Stores a new ledger (nothing enqueued yet).
    static func create(_ workload: Workload, in store: Store) async throws {
        try await store.run("start the demo's ledger") { try await store.backend.createLedger(for: workload) }
    }

    /// Enqueues actions `from..<to` and records the new `enqueued` count, in one transaction.
    static func enqueue(_ workload: Workload, from: Int, to: Int, in store: Store) async throws {
        try await store.run("enqueue the demo's uploads") { try await store.backend.enqueue(workload, from: from, to: to) }
    }

    /// Adds to a counter of the ledger, if the database holds a demo.
    static func add(_ amount: Int, to counter: Counter, in store: Store) async throws {
        try await store.run("update the demo's ledger") { try await store.backend.add(amount, to: counter) }
    }
}

/// `n` in decimal, left-padded with zeros to `width` digits.
func pad(_ n: Int, _ width: Int) -> String {
    let digits = String(n)
    return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
}

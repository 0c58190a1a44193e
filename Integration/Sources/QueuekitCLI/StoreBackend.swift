import TaskBroker

/// What the tool writes in its own SQL, together with actions in one transaction: the demo's
/// ledger. SQLite (GRDB) and PostgreSQL (postgres-nio) each do it in their own dialect.
protocol StoreBackend: Sendable {
    /// The stored ledger, or `nil` when the database holds no demo.
    func loadLedger() async throws -> DemoLedger?

    /// Stores a new ledger for `workload` (nothing enqueued yet), replacing any other.
    func createLedger(for workload: Workload) async throws

    /// Enqueues actions `from..<to` of `workload` and records `to` as enqueued, in one transaction.
    func enqueue(_ workload: Workload, from: Int, to: Int) async throws

    /// Adds `amount` to a counter of the ledger, if the database holds a demo.
    func add(_ amount: Int, to counter: DemoLedger.Counter) async throws

    /// Forgets the demo (for `demo --fresh` where the database is not a file to delete).
    func deleteLedger() async throws
}

/// A failure of the tool's own SQL, as one line.
struct StoreBackendError: Error, CustomStringConvertible {
    var message: String

    var description: String { message }
}

import Foundation
import Logging
import NIOCore
import PostgresNIO
import TaskBrokerCore

/// TaskBroker's tables in one PostgreSQL schema, their migrations and every statement the backend
/// runs.
///
/// - `action`: one row per stored action, keyed by collection and key; `position` orders a queue,
///   `revision` changes with every save (both from one sequence); `pause_kind` is `NULL` (runs),
///   1 (until `pause_until`, seconds since 1970) or 2 (until restarted); `not_before` is the
///   earliest start (seconds since 1970; `NULL`: at once); `state` is 0 (ready) or 1 (a dead
///   letter, never read as part of its queue; statements say `state <> 1` for ready: an equality
///   on a column without statistics yet made the planner read whole queues through a bitmap scan
///   instead of their first actions through the index); `last_failure` and `failed_at` record the last
///   failed run.
/// - `queue`: one row per queue ever saved, with its lease: `owner`, `epoch` (the fencing token,
///   +1 with every claim) and `expires_at` (server time; in the past when released), and whether
///   an operator paused it (`paused`).
/// - `broker`: the brokers running on the schema, one row per name and storage (`owner`), kept
///   alive by their storage (every heartbeat interval) until `expires_at`: brokers of other processes whose
///   names are prefixes of each other are refused (``PostgresTaskStorage/registerBroker(name:claimsPrefix:)``).
/// - `schedule`: one row per schedule of a `TaskScheduler`: its last recorded tick (seconds since
///   1970), when it was recorded (server time), the key of its action, and the next tick and the
///   recurrence as the last scheduler that ran it described them.
/// - `rate_start`: one row per start recorded in a rate limit's bucket, at its time (the server's
///   clock, seconds since 1970) and when it leaves the limit's window (`expires_at`); any request
///   for starts deletes the rows that left their windows, of every bucket.
/// - `parallel_action`: plain parallel actions (`saveParallel`), kept apart from the queues' ordered
///   actions and claimed one row at a time: `owner`, a `token` every claim increments, and
///   `expires_at` (server time). `state`: 0 ready, 1 dead letter, 2 held until a broker starts.
/// - `meta`: the schema version.
struct PostgresSchema: Sendable {
    /// The schema version this code writes; a database with a newer one is refused.
    static let version: Int64 = 11

    let schema: String
    let action: String
    let queue: String
    let meta: String
    let broker: String
    let schedule: String
    let rateStart: String
    /// Plain parallel actions (``PostgresSchema/parallelTableDefinition``).
    let parallel: String
    let sequence: String
    /// The function that stores outcomes (``finishFunctionDefinition``).
    let finishFunction: String
    /// The NOTIFY channel of this schema's brokers.
    let channel: String

    init(schema: String) {
        self.schema = schema
        action = "\"\(schema)\".action"
        queue = "\"\(schema)\".queue"
        meta = "\"\(schema)\".meta"
        broker = "\"\(schema)\".broker"
        schedule = "\"\(schema)\".schedule"
        rateStart = "\"\(schema)\".rate_start"
        parallel = "\"\(schema)\".parallel_action"
        sequence = "\"\(schema)\".revision_seq"
        finishFunction = "\"\(schema)\".finish"
        channel = "taskbroker_\(schema)"
    }

    // MARK: - Rows

    static let taskColumns = """
        collection, key, queue_name, payload, position, revision, attempts, pause_kind, pause_until, \
        not_before, priority, last_failure, failed_at, trace_context
        """

    /// A stored action from a row of ``taskColumns``.
    static func task(_ row: PostgresRow) throws -> StoredTask {
        var cells = RowReader(row)
        return try task(&cells)
    }

    /// A stored action from the next cells of a row, as ``task(_:)`` reads them; the cells after
    /// them are left to read.
    static func task(_ cells: inout RowReader) throws -> StoredTask {
        try task(collection: try cells.next(), &cells)
    }

    /// A stored action from the cells after its collection (read already), as ``task(_:)`` reads them.
    static func task(collection: String, _ cells: inout RowReader) throws -> StoredTask {
        let key: String = try cells.next()
        return StoredTask(
            key: key, collection: collection, queueName: try cells.next(), payload: try cells.next(),
            position: try cells.next(), revision: try cells.next(), attempts: Int(try cells.next(Int32.self)),
            pause: pause(kind: try cells.next(), until: try cells.next()),
            notBefore: (try cells.next(Double?.self)).map(Date.init(timeIntervalSince1970:)),
            priority: Int(try cells.next(Int64.self)),
            lastFailure: failure(reason: try cells.next(), at: try cells.next()),
            traceContext: TaskTraceHeaders.decoded(try cells.next(String?.self))
        )
    }

    static func failure(reason: String?, at seconds: Double?) -> TaskFailure? {
        reason.map { TaskFailure(reason: $0, failedAt: Date(timeIntervalSince1970: seconds ?? 0)) }
    }

    static func pause(kind: Int16?, until: Double?) -> TaskPause? {
        switch kind {
        case 1: .until(Date(timeIntervalSince1970: until ?? 0))
        case 2: .untilRestart
        default: nil
        }
    }
}

/// Reads a row's cells in column order. Cheaper than `PostgresRow.decode` with a tuple type, which
/// looks the tuple's metadata up again for every row: that look-up cost more than the decoding
/// itself, about a tenth of a burn-down worker's CPU (most of it reading the stored actions).
struct RowReader {
    private var cells: PostgresRow.Iterator

    init(_ row: PostgresRow) {
        cells = row.makeIterator()
    }

    mutating func next<Value: PostgresDecodable>(_: Value.Type = Value.self) throws -> Value {
        guard let cell = cells.next() else {
            throw TaskBrokerError(code: .storageFailed, message: "A row from PostgreSQL has fewer columns than TaskBroker's statement selects.")
        }
        return try cell.decode(Value.self)
    }
}

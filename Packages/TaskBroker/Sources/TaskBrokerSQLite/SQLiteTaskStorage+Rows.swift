import Foundation
import GRDB
import TaskBrokerCore

// A row of `taskbroker_action` as a `StoredTask`: its columns, their decoding, and the typed error
// for a value of the wrong type.
extension SQLiteTaskStorage {
    /// The columns `task(from:)` reads, in its order.
    static let selectedColumns = """
        key, collection, queue_name, payload, position, revision, attempts, pause_kind, pause_until, \
        not_before, priority, last_failure, failed_at, trace_context
        """

    ///
    /// The columns are declared `NOT NULL` with a type, but SQLite stores any value in any column
    /// of an ordinary table: a row written outside QueueKit (a hand edit, another tool, damage)
    /// may hold text where a number belongs. Such a row is a typed `TaskBrokerError`
    /// (`.corruptDatabase`), never a crash (GRDB's non-throwing subscripts trap on it; found by
    /// the `TaskRowFuzzer` fuzz target).
    /// - Throws: `TaskBrokerError` `.corruptDatabase` when a column does not hold its type.
    static func task(from row: Row) throws(TaskBrokerError) -> StoredTask {
        do {
            let kind = try row.decode(Int.self, atIndex: 7)
            let until = try row.decode(Double?.self, atIndex: 8)
            let pause: TaskPause?
            switch kind {
            case 1:
                guard until?.isFinite ?? true else {
                    throw TaskBrokerError(
                        code: .corruptDatabase,
                        message: "A stored action's pause ends at \(until ?? 0), which is no time; "
                            + "repair or delete the row in taskbroker_action."
                    )
                }
                pause = .until(Date(timeIntervalSince1970: until ?? 0))
            case 2: pause = .untilRestart
            default: pause = nil
            }
            let notBefore = try row.decode(Double?.self, atIndex: 9)
            return StoredTask(
                key: try row.decode(atIndex: 0), collection: try row.decode(atIndex: 1),
                queueName: try row.decode(atIndex: 2), payload: try row.decode(atIndex: 3),
                position: try row.decode(atIndex: 4), revision: try row.decode(atIndex: 5),
                attempts: try row.decode(atIndex: 6), pause: pause,
                notBefore: try notBefore.map { seconds throws(TaskBrokerError) in try date(seconds, of: "not-before time") },
                priority: try row.decode(atIndex: 10),
                lastFailure: try failure(reason: try row.decode(atIndex: 11), at: try row.decode(atIndex: 12)),
                // Damaged trace context costs the trace link, not the action.
                traceContext: TaskTraceHeaders.decoded(try? row.decode(String?.self, atIndex: 13))
            )
        } catch {
            throw wrongType(error)
        }
    }

    /// A row's value that does not decode as its column's type: `TaskBrokerError` as it is,
    /// anything else (GRDB's decoding error) as `.corruptDatabase`.
    static func wrongType(_ error: any Error) -> TaskBrokerError {
        if let error = error as? TaskBrokerError { return error }
        return TaskBrokerError(
            code: .corruptDatabase,
            message: "A stored action row holds a value of the wrong type (the database was changed outside "
                + "QueueKit or is damaged); repair or delete the row in taskbroker_action.",
            underlying: error
        )
    }

    /// A failure record from its columns (`nil` without a reason).
    static func failure(reason: String?, at seconds: Double?) throws(TaskBrokerError) -> TaskFailure? {
        guard let reason else { return nil }
        return TaskFailure(reason: reason, failedAt: try date(seconds ?? 0, of: "failure time"))
    }

    /// A stored time (seconds since 1970) as a date; a value that is no time (NaN, infinite) is a corrupt row.
    static func date(_ seconds: Double, of what: String) throws(TaskBrokerError) -> Date {
        guard seconds.isFinite else {
            throw TaskBrokerError(
                code: .corruptDatabase,
                message: "A stored action's \(what) is \(seconds), which is no time; repair or delete the row in taskbroker_action."
            )
        }
        return Date(timeIntervalSince1970: seconds)
    }

    static func columns(for pause: TaskPause?) -> (Int, Double?) {
        switch pause {
        case nil: (0, nil)
        case .until(let date): (1, date.timeIntervalSince1970)
        case .untilRestart: (2, nil)
        }
    }
}

import Foundation
import Logging
import NIOCore
import PostgresNIO
import TaskBrokerCore
import Synchronization

// Running the backend's operations on pooled connections: transactions, the time limit, a closed
// connection, deadlock retries, typed errors.
extension PostgresTaskStorage {
    /// Runs `body` in one transaction on a pooled connection: committed when it returns, rolled
    /// back when it throws (its error unchanged), with storage errors made typed; run again when
    /// PostgreSQL aborted it to break a deadlock (``runAgainIfAborted(_:_:)``). Only for this
    /// storage's own statements: a caller's `write` is never run twice.
    func transaction<T: Sendable>(
        _ what: String, within timeout: Duration? = nil, on pool: PostgresClient? = nil,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await runAgainIfAborted(what) {
            try await committed(within: timeout, on: pool, body)
        }
    }

    /// Runs `body` in a transaction of its own on a pooled connection, and returns once its COMMIT
    /// answered. A statement sent on its own is committed only after PostgreSQL answered that it
    /// completed, and postgres-nio reports it done on that answer: a commit that then failed (a
    /// full notification queue, a deferred check, a server that stopped before the commit reached
    /// its disk) went unseen, and the broker took an outcome that was never stored for stored (it
    /// ran the queue's next action, and the stored one ran again later, out of order). The
    /// explicit COMMIT answers only once the commit is done, or fails.
    func committed<T: Sendable>(
        within timeout: Duration? = nil, on pool: PostgresClient? = nil, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await withConnection(within: timeout, on: pool) { [self] connection in
            try await Self.inTransaction(connection, logger: logger, body)
        }
    }

    /// Runs `body` on a connection of `pool` (the operations' pool unless given), and gives up on
    /// it as soon as the connection closes, or if the server has not answered within `timeout`
    /// (`PostgresConfiguration.operationTimeout` unless given).
    ///
    /// - A connection that closes (a server restart or failover, `pg_terminate_backend`, a reset)
    ///   ends the operation at once with ``ConnectionClosed``. postgres-nio writes a query to a
    ///   channel that is already closing without failing it, and the pool can hand out a
    ///   connection whose close it has not processed yet: without this, such an operation never
    ///   answered, and only the time limit ended it while its queue stood still.
    /// - A connection that stays open but silent (a network cut, a NAT that forgot it, a server
    ///   process that hangs) is closed when the time is up, and this throws ``NoAnswer``.
    ///   postgres-nio has no time limit of its own: the operation would wait for the operating
    ///   system to give up on the connection, many minutes.
    ///
    /// ``run(_:_:)`` makes either a `storageFailed` that says so; the pool replaces the connection.
    /// The time limit is a timer on the connection's event loop. `body` runs as background work of
    /// this storage (``BackgroundWork``: it sees none of the caller's task-local values), and this
    /// does not wait for it once the operation is given up on: a query sent on the connection
    /// after it was closed never answers (postgres-nio drops a statement written to a closed
    /// channel without failing it), and a `body` between two statements at that moment would hang
    /// forever, and its caller with it. Such a `body` is left behind, with what it holds; the
    /// transactions' own ROLLBACK is not sent on a closed connection, so it takes a close that
    /// lands between two statements. Cancelling the caller cancels `body`.
    func withConnection<T: Sendable>(
        within timeout: Duration? = nil, on pool: PostgresClient? = nil,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        let limit = timeout ?? configuration.operationTimeout
        return try await (pool ?? client).withConnection { connection in
            let outcome = SettledOnce<T>()
            let done = closing.watch(connection) { outcome.settle(.failure(ConnectionClosed())) }
            defer { done() }
            let work = background.start {
                do {
                    outcome.settle(.success(try await body(connection)))
                } catch {
                    outcome.settle(.failure(error))
                }
            }
            // Only once the storage has ended, which it does not while one of its operations runs.
            if work == nil { outcome.settle(.failure(CancellationError())) }
            // The time limit is a timer on the connection's event loop, not a task of its own.
            let watchdog = connection.eventLoop.flatScheduleTask(in: .clamping(limit)) { [logger, configuration] in
                guard outcome.settle(.failure(NoAnswer(limit: limit))) else { return connection.eventLoop.makeSucceededVoidFuture() }
                logger.warning("PostgreSQL at \(configuration.endpoint) did not answer within \(limit); closing the connection")
                return connection.close().recover { _ in }
            }
            let result = await withTaskCancellationHandler {
                await outcome.result
            } onCancel: {
                work?.stop()
            }
            // The pool gets the connection back only once the watchdog is done with it: a close
            // that landed after the release closed it under the next operation the pool gave it to.
            // (A timer that had not fired is cancelled; one that fired is waited for.)
            watchdog.cancel()
            _ = try? await watchdog.futureResult.get()
            return try result.get()
        }
    }

    static func inTransaction<T>(
        _ connection: PostgresConnection, logger: Logger, _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await connection.execute("BEGIN", logger: logger)
        let value: T
        do {
            value = try await body(connection)
        } catch {
            // Not on a connection the time limit closed: a statement written to a closed
            // connection never answers (see `withConnection(within:on:_:)`).
            if !connection.isClosed { try? await connection.execute("ROLLBACK", logger: logger) }
            throw error
        }
        // PostgreSQL answers the COMMIT of a transaction in which a statement failed with a
        // ROLLBACK, not an error: a body that caught that statement's error would otherwise
        // return as if everything it did were stored.
        let commit: EventLoopFuture<PostgresQueryResult> = connection.query("COMMIT", logger: logger)
        let tag = try await commit.get().metadata.command
        guard tag == "COMMIT" else {
            throw TaskBrokerError(
                code: .storageFailed,
                message: "PostgreSQL rolled the transaction back (its COMMIT answered \(tag)): a statement in it failed, "
                    + "and its error was caught inside the transaction. Nothing of it was stored; let the error out of the "
                    + "transaction (or roll back to a savepoint) and try again."
            )
        }
        return value
    }

    /// Runs one of this storage's own operations (``run(_:_:)``), and runs it again, up to three
    /// times in all, when PostgreSQL aborted it to break a deadlock or a serialization conflict:
    /// nothing of it was applied, and the transaction it conflicted with goes on. A save that
    /// replaces running actions in an order opposite to a finish's can deadlock with that finish;
    /// the caller of either should not see it.
    func runAgainIfAborted<T>(_ what: String, _ body: () async throws -> T) async throws -> T {
        var attempt = 1
        while true {
            do {
                return try await run(what, body)
            } catch let error as TaskBrokerError where attempt < Self.attemptsAfterAborts && Self.wasAborted(error) {
                logger.notice("PostgreSQL aborted the attempt to \(what) (\(PostgresErrors.reason(error.underlying ?? error))); trying again")
                attempt += 1
            }
        }
    }

    static let attemptsAfterAborts = 3

    /// Whether PostgreSQL aborted the statement to break a deadlock (40P01) or a serialization
    /// conflict (40001).
    static func wasAborted(_ error: TaskBrokerError) -> Bool {
        guard let error = error.underlying as? PSQLError, let state = error.serverInfo?[.sqlState] else { return false }
        return state == "40P01" || state == "40001"
    }

    /// Runs a storage operation; a PostgreSQL or connection error becomes `storageFailed`. A
    /// cancelled caller gets `CancellationError`, not `storageFailed`'s "not applied": its COMMIT
    /// may have reached the server before the cancellation did.
    func run<T>(_ what: String, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as TaskBrokerError {
            throw error
        } catch let error as UserCodeFailed {
            throw error
        } catch where Task.isCancelled {
            throw CancellationError()
        } catch let error as NoAnswer {
            throw PostgresErrors.noAnswer(what, within: error.limit, configuration)
        } catch let error as ConnectionClosed {
            throw PostgresErrors.storageFailed(what, error, configuration)
        } catch {
            throw PostgresErrors.storageFailed(what, error, configuration)
        }
    }
}

/// The first of outcomes that race, kept once; later ones are dropped. An operation and its time
/// limit (`PostgresTaskStorage.withConnection(within:on:_:)`), the change feed's first connection
/// (listening, or its error).
final class SettledOnce<T: Sendable>: Sendable {
    private let state = Mutex<(outcome: Result<T, any Error>?, waiter: CheckedContinuation<Result<T, any Error>, Never>?)>((nil, nil))

    /// Records `outcome` unless another came first; returns whether it was recorded.
    @discardableResult
    func settle(_ outcome: Result<T, any Error>) -> Bool {
        let (recorded, waiter) = state.withLock { state -> (Bool, CheckedContinuation<Result<T, any Error>, Never>?) in
            guard state.outcome == nil else { return (false, nil) }
            state.outcome = outcome
            defer { state.waiter = nil }
            return (true, state.waiter)
        }
        waiter?.resume(returning: outcome)
        return recorded
    }

    /// The first outcome, once there is one.
    var result: Result<T, any Error> {
        get async {
            await withCheckedContinuation { waiter in
                let outcome = state.withLock { state -> Result<T, any Error>? in
                    if state.outcome == nil { state.waiter = waiter }
                    return state.outcome
                }
                if let outcome { waiter.resume(returning: outcome) }
            }
        }
    }
}

/// The server did not answer within `limit`, and the connection was closed (see
/// `PostgresTaskStorage.withConnection(within:on:_:)`).
struct NoAnswer: Error {
    let limit: Duration
}

/// The operation's connection closed before it answered (see
/// `PostgresTaskStorage.withConnection(within:on:_:)`).
struct ConnectionClosed: Error, CustomStringConvertible {
    var description: String { "the connection closed before the operation answered" }
}

/// An error thrown by the caller's own code inside a transaction, carried through the storage
/// error handling unchanged.
struct UserCodeFailed: Error {
    let error: any Error
}

extension TimeAmount {
    /// `duration` in nanoseconds, clamped to what a `TimeAmount` holds (negative: zero).
    static func clamping(_ duration: Duration) -> TimeAmount {
        let parts = duration.components
        guard parts.seconds >= 0 else { return .zero }
        let (whole, overflow) = parts.seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return .nanoseconds(.max) }
        let (total, overflowAgain) = whole.addingReportingOverflow(parts.attoseconds / 1_000_000_000)
        return .nanoseconds(overflowAgain ? .max : total)
    }
}

extension Duration {
    /// Whole milliseconds, for interval arithmetic in SQL.
    var milliseconds: Int64 {
        let parts = components
        return parts.seconds * 1000 + parts.attoseconds / 1_000_000_000_000_000
    }
}

extension PostgresConnection {
    /// Runs a statement and reads its result to the end (a result left unread would hold the
    /// connection's next statement back).
    func execute(_ query: PostgresQuery, logger: Logger) async throws {
        _ = try await self.query(query, logger: logger).collect()
    }
}

extension [StoredTask] {
    /// Whether the actions are in enqueue (position) order.
    var isInEnqueueOrder: Bool {
        indices.dropFirst().allSatisfy { self[$0 - 1].position < self[$0].position }
    }
}

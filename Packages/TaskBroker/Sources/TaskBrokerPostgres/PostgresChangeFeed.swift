import Foundation
import Logging
import PostgresNIO
import Synchronization
import TaskBrokerCore

/// The change feed of the PostgreSQL backend: one connection that `LISTEN`s on the schema's
/// channel, re-established with backoff when it drops, each time followed by one catch-up scan.
enum PostgresChangeFeed {
    private static let connectionIDs = Atomic<Int>(1)

    /// Starts listening, as background work of the storage (``BackgroundWork``: it ends with the
    /// stream's consumer, or with the storage); returns once the server has confirmed the first
    /// `LISTEN`.
    ///
    /// - Throws: The first connection's error (`connectionFailed`, `storageFailed`).
    static func start(storage: PostgresTaskStorage) async throws -> AsyncStream<[TaskStorageChange]> {
        let (stream, continuation) = AsyncStream.makeStream(of: [TaskStorageChange].self)
        // Settled by the first connection: listening (confirmed), or its error.
        let first = SettledOnce<Void>()
        let job = storage.background.start {
            await follow(storage: storage, continuation: continuation) { error in
                first.settle(error.map { .failure($0) } ?? .success(()))
            }
        }
        guard let job else {
            throw TaskBrokerError(code: .storageFailed, message: "the PostgreSQL storage has ended: its change feed cannot start")
        }
        let local = storage.addLocalFeed(continuation)
        continuation.onTermination = { [weak storage] _ in
            job.stop()
            storage?.removeLocalFeed(local)
        }
        try await first.result.get()
        return stream
    }

    /// How one connection's listening ended.
    private enum Ending {
        /// The feed stops: the first connection failed (its error was reported), or it was cancelled.
        case stop
        /// The connection dropped, or stopped answering: listen again.
        case dropped
    }

    private static func follow(
        storage: PostgresTaskStorage, continuation: AsyncStream<[TaskStorageChange]>.Continuation,
        started: @escaping @Sendable ((any Error)?) -> Bool
    ) async {
        await withTaskGroup(of: Void.self) { group in
            // Keeps this storage's broker records alive for as long as the feed runs (see
            // `registerBroker`), on the storage's pool: a write that waits for the disk has no place
            // in the heartbeat, whose answer must come within the interval.
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: storage.configuration.heartbeatInterval)
                    if Task.isCancelled { break }
                    await storage.refreshBrokerRecords()
                }
            }
            await listen(storage: storage, continuation: continuation, started: started)
            group.cancelAll()
        }
        // Cancelled before its first connection answered: whoever waits for the start hears it.
        _ = started(CancellationError())
        continuation.finish()
    }

    /// Listens on one connection after another, until cancelled or the first one fails.
    private static func listen(
        storage: PostgresTaskStorage, continuation: AsyncStream<[TaskStorageChange]>.Continuation,
        started: @escaping @Sendable ((any Error)?) -> Bool
    ) async {
        let logger = storage.logger
        var failures = 0
        while !Task.isCancelled {
            if failures > 0 {
                try? await Task.sleep(for: backoff(after: failures))
                if Task.isCancelled { break }
            }
            let connection: PostgresConnection
            do {
                connection = try await PostgresTaskStorage.openConnection(
                    storage.configuration, id: connectionIDs.add(1, ordering: .relaxed).newValue,
                    applicationName: "taskbroker feed \(storage.configuration.schema)"
                )
            } catch {
                if started(error) { break }
                failures += 1
                logger.warning("could not reconnect the change feed to \(storage.configuration.endpoint) (attempt \(failures)): \(error)")
                continue
            }
            let (ending, listened) = await withTaskGroup(of: Void.self) { group in
                // Closes the connection if it stops answering: the listen below then ends with an error.
                group.addTask {
                    await checkAnswers(of: connection, every: storage.configuration.heartbeatInterval, logger: logger)
                }
                let ending = await listen(on: connection, storage: storage, continuation: continuation, failures: failures, started: started)
                group.cancelAll()
                // Ends a `SELECT 1` of the heartbeat's that is still waiting for its answer.
                try? await connection.close()
                return ending
            }
            if case .stop = ending { break }
            if listened { failures = 0 }
            failures += 1
        }
    }

    /// Listens on `connection` until it drops, delivering what it hears.
    ///
    /// - Returns: How it ended, and whether the server confirmed the `LISTEN` first.
    private static func listen(
        on connection: PostgresConnection, storage: PostgresTaskStorage,
        continuation: AsyncStream<[TaskStorageChange]>.Continuation, failures: Int,
        started: @escaping @Sendable ((any Error)?) -> Bool
    ) async -> (Ending, listened: Bool) {
        let logger = storage.logger
        let decoder = JSONDecoder()
        // This storage's own finishes: already delivered in process (`PostgresTaskStorage.finish`).
        let own = Array(ChangeMessage.originPrefix(storage.origin).utf8)
        var listening = false
        do {
            try await connection.listen(on: storage.sql.channel) { notifications in
                if !started(nil) {
                    // Listening again after a drop: changes committed while nobody listened
                    // were not announced, so read everything once.
                    logger.notice("the change feed listens again after \(failures) attempt(s)")
                    await catchUp(storage, continuation)
                }
                listening = true
                for try await notification in notifications {
                    if notification.payload.utf8.starts(with: own) { continue }
                    let message = try? decoder.decode(ChangeMessage.self, from: Data(notification.payload.utf8))
                    if let changes = message?.changes() {
                        if !changes.isEmpty { continuation.yield(changes) }
                    } else {
                        await catchUp(storage, continuation)
                    }
                }
            }
        } catch {
            let wrapped = PostgresErrors.storageFailed("listen for changes", error, storage.configuration)
            if started(wrapped) { return (.stop, listening) }
            if !Task.isCancelled {
                logger.warning("the change feed's connection to \(storage.configuration.endpoint) dropped: \(PostgresErrors.reason(error)); reconnecting")
            }
        }
        return (Task.isCancelled ? .stop : .dropped, listening)
    }

    /// Asks the connection for `SELECT 1` every `interval`, until cancelled; closes it when an
    /// answer does not come within `interval` (or the query fails). A listening connection
    /// otherwise only receives: one whose peer is gone without a word (a NAT or firewall that
    /// dropped the connection, a host that lost power, a server process that hangs) would look
    /// alive until the operating system gives up on it, many minutes later, and every save of
    /// another process would wait until then.
    private static func checkAnswers(of connection: PostgresConnection, every interval: Duration, logger: Logger) async {
        while !Task.isCancelled {
            try? await Task.sleep(for: interval)
            if Task.isCancelled { return }
            let answered = await withTaskGroup(of: Bool.self) { group in
                group.addTask {
                    do {
                        try await connection.execute("SELECT 1", logger: logger)
                        return true
                    } catch {
                        return false
                    }
                }
                group.addTask {
                    try? await Task.sleep(for: interval)
                    return false
                }
                let first = await group.next() ?? false
                if !first {
                    // Said before closing: the close ends the feed's listen, which cancels this
                    // task. (When already cancelled, the feed is done with this connection.)
                    if !Task.isCancelled {
                        logger.warning("the change feed's connection did not answer within \(interval); closing it to listen again")
                    }
                    // Closing ends the query that did not answer, so that the group can return.
                    try? await connection.close()
                }
                group.cancelAll()
                return first
            }
            if !answered { return }
        }
    }

    /// The wait before the next try after `failures` failures in a row: 50 ms, doubled each time, at most 5 s.
    private static func backoff(after failures: Int) -> Duration {
        .milliseconds(min(5_000, 50 << min(failures - 1, 7)))
    }

    /// Tells the brokers to read every stored queue, trying again with backoff until the scan
    /// works: a queue saved while nobody listened is known of only through it (one with no lease
    /// has no expiry to wake a broker either). Notifications that arrive meanwhile wait.
    private static func catchUp(_ storage: PostgresTaskStorage, _ continuation: AsyncStream<[TaskStorageChange]>.Continuation) async {
        var failures = 0
        while !Task.isCancelled {
            do {
                let names = try await storage.queueNames()
                if !names.isEmpty { continuation.yield([.queuesChanged(names)]) }
                if failures > 0 { storage.logger.notice("the change feed's catch-up scan worked after \(failures) failure(s)") }
                return
            } catch {
                failures += 1
                let delay = backoff(after: failures)
                storage.logger.error("the change feed's catch-up scan failed (attempt \(failures)): \(error); trying again in \(delay)")
                try? await Task.sleep(for: delay)
            }
        }
    }
}

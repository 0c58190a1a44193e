// PostgreSQL only: not compiled in a build without TaskBrokerPostgres (the AddressSanitizer run).
#if canImport(TaskBrokerPostgres)
import Glibc
import PostgresNIO
import TaskBroker
import TaskBrokerPostgres

/// The PostgreSQL server processes behind connections, for tests that stop them (SIGSTOP) to
/// make a connection go silent, as a network cut or a hung server does.
enum ServerProcesses {
    /// The server processes of the connections whose `application_name` is `applicationName`.
    static func named(_ applicationName: String, asking admin: TaskDatabase) async throws -> [Int32] {
        try await admin.write { tx -> [Int32] in
            let rows = try await tx.query("SELECT pid FROM pg_stat_activity WHERE application_name = \(applicationName)")
            var pids: [Int32] = []
            for try await pid in rows.decode(Int32.self) { pids.append(pid) }
            return pids
        }
    }

    /// Stops `process` (SIGSTOP) and keeps it stopped only if it was idle, waiting for its client;
    /// otherwise lets it go on (SIGCONT). Returns whether it is stopped (`false` also when it no
    /// longer exists).
    ///
    /// Stopped at any moment, it may hold a lock that the test's own writes then wait for: a
    /// listening process stopped while it reads notifications (other tests' saves wake every
    /// listener) holds one that every commit with a NOTIFY needs (the notification queue's, or a
    /// commit-log lock); one stopped inside a transaction holds its row locks. Idle and waiting
    /// for its client, it holds none: the state and wait event it reported last say where it
    /// stopped (it clears the wait event as soon as that wait ends, before it reads anything).
    static func stopIfWaitingForItsClient(_ process: Int32, asking admin: TaskDatabase) async throws -> Bool {
        guard kill(process, SIGSTOP) == 0 else { return false }
        let waiting = try await admin.write { tx -> Bool in
            let rows = try await tx.query(
                "SELECT state = 'idle' AND wait_event = 'ClientRead' FROM pg_stat_activity WHERE pid = \(process)"
            )
            var waiting = false
            for try await value in rows.decode(Bool?.self) { waiting = value ?? false }
            return waiting
        }
        if !waiting { kill(process, SIGCONT) }
        return waiting
    }
}
#endif

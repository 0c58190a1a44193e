import Foundation
import Synchronization
import TaskBrokerCore

/// What every `SQLiteTaskStorage` of one file shares in this process: the hub of its brokers and
/// the file's broker locks (one open descriptor for the life of the process: closing any
/// descriptor of the lock file would release every lock of the process on it).
final class SQLiteFile: Sendable {
    let hub: DatabaseHub
    let locks: SQLiteBrokerLocks

    private static let byPath = Mutex<[String: SQLiteFile]>([:])

    private init(path: String) {
        locks = SQLiteBrokerLocks(databasePath: path)
        hub = DatabaseHub(commitSignal: locks)
    }

    /// The share of a database file, the same for every store opened on it in this process.
    static func shared(forPath path: String) -> SQLiteFile {
        let key = URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
        return byPath.withLock { files in
            if let file = files[key] { return file }
            let file = SQLiteFile(path: key)
            files[key] = file
            return file
        }
    }
}

extension SQLiteBrokerLocks: CommitSignal {}

extension ExternalChangeWatcher: ExternalChangeWatching {}

extension SQLiteTaskStorage: MachineLocalStorage {
    func lockBroker(_ claim: BrokerClaim) async throws -> @Sendable () -> Void {
        let locks = file.locks
        guard try locks.lock(claim.name) else {
            throw TaskBrokerError(
                code: .queueAlreadyClaimed,
                message: "Another process runs a broker named \"\(claim.name)\" on \(path); an SQLite file serves one worker process per broker. Stop it first, or use PostgreSQL (TaskBrokerPostgres) for several worker processes."
            )
        }
        let stopWatching: @Sendable () -> Void
        do {
            for other in try await recordBroker(claim) {
                if let conflict = claim.conflict(with: other), try locks.isHeldElsewhere(other.name) {
                    throw TaskBrokerError(
                        code: .queueAlreadyClaimed,
                        message: "Another process runs broker \"\(other.name)\" on \(path). \(conflict.message)"
                    )
                }
            }
            stopWatching = try await watchOtherProcesses()
        } catch {
            locks.unlock(claim.name)
            throw error
        }
        return {
            locks.unlock(claim.name)
            stopWatching()
        }
    }

    func watchOtherProcesses() async throws -> @Sendable () -> Void {
        let head = try await journalHead()
        let hub = self.hub
        let signalFile = file.locks.path
        hub.retainWatcher { ExternalChangeWatcher(storage: self, head: head, signalFile: signalFile, notifier: hub.notifier) }
        return { hub.releaseWatcher() }
    }
}

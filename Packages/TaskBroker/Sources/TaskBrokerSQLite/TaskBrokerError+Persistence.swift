import QueuePersistence
import TaskBrokerCore

extension TaskBrokerError {
    /// Translates QueuePersistence's SQLite errors; the underlying error stays GRDB's when there is one.
    init(_ error: PersistenceError) {
        let code: Code
        switch error.code {
        case .corruptDatabase: code = .corruptDatabase
        case .databaseNotFound: code = .databaseNotFound
        case .incompatibleSchema: code = .incompatibleSchema
        default: code = .storageFailed
        }
        self.init(code: code, message: error.message, underlying: error.underlying ?? error)
    }
}

import Logging
import Synchronization

/// A log handler that keeps every message, so a test can check that something was logged.
struct RecordingLogHandler: LogHandler {
    final class Store: Sendable {
        private let entries = Mutex<[(Logger.Level, String)]>([])

        func append(_ level: Logger.Level, _ message: String) {
            entries.withLock { $0.append((level, message)) }
        }

        var messages: [(level: Logger.Level, message: String)] {
            entries.withLock { $0.map { (level: $0.0, message: $0.1) } }
        }
    }

    let store: Store
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    init(store: Store) {
        self.store = store
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        store.append(event.level, "\(event.message)")
    }
}

import Logging
import Synchronization

/// Keeps what is logged (level and message), for a test to read.
final class LogRecorder: LogHandler, Sendable {
    private let recorded = Mutex<[String]>([])

    var messages: [String] { recorded.withLock { $0 } }

    func log(event: LogEvent) {
        recorded.withLock { $0.append("\(event.level) \(event.message)") }
    }

    subscript(metadataKey _: String) -> Logger.Metadata.Value? {
        get { nil }
        set {}
    }

    var metadata: Logger.Metadata {
        get { [:] }
        set {}
    }

    var logLevel: Logger.Level {
        get { .notice }
        set {}
    }
}

import AsyncPrimitivesTesting
import Logging
import Synchronization

/// Keeps what is logged (level and message), for a test to read.
final class LogRecorder: LogHandler, Sendable {
    private let recorded = Mutex<[String]>([])
    private let lines = EventCollector<String>()

    var messages: [String] { recorded.withLock { $0 } }

    func log(event: LogEvent) {
        let line = "\(event.level) \(event.message)"
        recorded.withLock { $0.append(line) }
        lines.record(line)
    }

    /// Waits until a line containing `text` is logged (or was); returns it.
    @discardableResult
    func waitForLine(containing text: String) async -> String? {
        var count = 1
        while true {
            let values = await lines.values(count: count)
            guard values.count == count else { return nil }  // cancelled (past the time limit)
            if values[count - 1].contains(text) { return values[count - 1] }
            count += 1
        }
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

import Foundation
import Synchronization

/// Appends one line per attempt to a file, for scripts that check a run of several workers
/// (`queuekit demo-cluster` does):
///
///     start QUEUE KEY ATTEMPT NANOS
///     end QUEUE KEY ATTEMPT OUTCOME NANOS
///
/// `NANOS` is the system's monotonic clock, comparable between processes on one machine. Each
/// line is one `write(2)`, so a process killed with SIGKILL loses no line it has written.
final class TraceLog: Sendable {
    private let handle: Mutex<FileHandle>

    /// Creates (or truncates) the file at `path`.
    init(path: String) throws(QueuekitError) {
        guard FileManager.default.createFile(atPath: path, contents: nil),
              let handle = FileHandle(forWritingAtPath: path)
        else {
            throw QueuekitError("cannot write the trace file \(path).")
        }
        self.handle = Mutex(handle)
    }

    /// Records that an attempt started.
    func started(queue: String, key: String, attempt: Int) {
        write("start \(queue) \(key) \(attempt) \(Self.now())")
    }

    /// Records how an attempt ended (`uploaded`, `retry`, `dead`).
    func ended(queue: String, key: String, attempt: Int, outcome: String) {
        write("end \(queue) \(key) \(attempt) \(outcome) \(Self.now())")
    }

    /// The monotonic clock in nanoseconds (`CLOCK_MONOTONIC`: the same clock in every process).
    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    private func write(_ line: String) {
        handle.withLock { $0.write(Data((line + "\n").utf8)) }
    }
}

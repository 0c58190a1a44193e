// A worker process for the crash test: it runs the broker "crash" on the database given as the
// first argument and logs every action to the file given as the second, with fsync, before it
// reports progress on stdout. The test kills it with SIGKILL at random moments.
//
//   TaskBrokerCrashHelper <database path> <log path>
//
// stdout lines: "ready", "done <key>" after each handled action, "drained" when nothing is left.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization
import TaskBroker

struct CrashAction: TaskQueueAction {
    var key: String
    var collection: String
    var queueName: String
    var index: Int
}

/// Appends lines to a file and fsyncs each one.
final class DurableLog: Sendable {
    private let descriptor: Mutex<Int32>

    init(path: String) {
        descriptor = Mutex(open(path, O_WRONLY | O_APPEND | O_CREAT, 0o644))
    }

    func append(_ line: String) {
        descriptor.withLock { fd in
            let bytes = Array((line + "\n").utf8)
            _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            _ = fsync(fd)
        }
    }
}

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

final class CrashHandler: AsyncTaskQueueHandler {
    let log: DurableLog

    init(log: DurableLog) {
        self.log = log
    }

    func handle(_ action: CrashAction, context _: TaskContext) async -> TaskResult {
        log.append("start \(action.key)")
        log.append("done \(action.key)")
        say("done \(action.key)")
        return .success
    }
}

let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    say("usage: TaskBrokerCrashHelper <database> <log>")
    exit(2)
}
do {
    let database = try await TaskDatabase.sqlite(path: arguments[1])
    let handler = CrashHandler(log: DurableLog(path: arguments[2]))
    let broker = try await TaskQueueBroker.setup(
        database: database, name: "crash", handler: handler, configuration: .init(maxConcurrentQueues: 3)
    )
    let events = broker.events
    say("ready")
    if try await database.snapshot().isEmpty {
        say("drained")
        exit(0)
    }
    for await event in events {
        if case .succeeded = event, try await database.snapshot().isEmpty {
            say("drained")
            exit(0)
        }
    }
} catch {
    say("error \(error)")
    exit(1)
}

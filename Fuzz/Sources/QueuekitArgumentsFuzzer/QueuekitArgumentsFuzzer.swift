import ArgumentParser
import Foundation
import FuzzSupport
import QueueRetry
@testable import QueuekitCLI

// The contract of `queuekit`'s command line: any arguments parse to a command or give an error
// (ArgumentParser's, or a QueuekitError with a usage status), never a crash or a hang; and what
// a parsed command derives from its options before it touches a database (the `--database`
// location, the retry and work settings, the demo's workload) is computed without a crash.
//
// Input: the arguments, separated by NUL bytes (at most 24 of them).
@main
enum Main {
    static func main() { runLibFuzzer(fuzzQueuekitArguments) }
}

/// Checks one input (libFuzzer calls it by this C name when its own `main` runs the loop).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzQueuekitArguments(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = inputBytes(start, count)
    let arguments = bytes.split(separator: 0, omittingEmptySubsequences: false).prefix(24)
        .map { String(decoding: $0, as: UTF8.self) }
    // The `--database` value alone.
    if let location = arguments.first, let options = try? DatabaseOptions.parse(["--database", location]) {
        expectUsageError { _ = try options.location() }
    }
    let command: any ParsableCommand
    do {
        command = try Queuekit.parseAsRoot(arguments)
    } catch {
        // Every parse error has a message and an exit status; neither may crash.
        _ = Queuekit.message(for: error)
        _ = Queuekit.exitCode(for: error)
        return 0
    }
    switch command {
    case let work as Work:
        expectUsageError { _ = try work.options.location() }
        exercise(work.work)
    case let demo as Demo:
        expectUsageError { _ = try demo.options.location() }
        exercise(demo.work)
        exercise(demo.workloadOptions, maxAttempts: demo.work.maxAttempts)
    case let cluster as DemoCluster:
        expectUsageError { _ = try cluster.options.location() }
        exercise(cluster.work)
        exercise(cluster.workloadOptions, maxAttempts: cluster.work.maxAttempts)
    case let enqueue as Enqueue:
        expectUsageError { _ = try enqueue.options.location() }
        _ = QueueNames.live(QueueNames.user(of: enqueue.queue))
    case let list as List:
        expectUsageError { _ = try list.options.location() }
    case let retry as Retry:
        expectUsageError { _ = try retry.options.location() }
        _ = QueueNames.user(of: retry.queue)
    default:
        break
    }
    return 0
}

/// Computes what the handler derives from the work options while it runs: the retry delays and
/// the simulated work time of the smallest and largest uploads.
private func exercise(_ options: WorkOptions) {
    let settings = options.settings(maxAttempts: options.maxAttempts)
    for failures in [0, 1, 2, 62, 63, 64, Int.max] {
        _ = settings.backoff.delay(afterFailures: failures)
    }
    _ = settings.work(for: 1)
    _ = settings.work(for: 8_000_000)
}

/// Derives the demo's first and last uploads from the workload options.
private func exercise(_ options: WorkloadOptions, maxAttempts: Int) {
    let workload = options.workload(maxAttempts: maxAttempts)
    if workload.total > 0 {
        _ = workload.action(at: 0)
        _ = workload.action(at: workload.total - 1)
    }
}

/// Runs `body`; the only error it may throw is a QueuekitError with the usage status (64).
private func expectUsageError(_ body: () throws -> Void) {
    do {
        try body()
    } catch let error as QueuekitError {
        precondition(error.exitCode == 64, "a bad location is a usage error, got status \(error.exitCode)")
    } catch {
        preconditionFailure("untyped error: \(type(of: error)) \(error)")
    }
}

import Foundation
import TaskBroker
import Testing

/// Traces cross processes: an action saved inside a span in one process runs, in another, as a
/// span of the same trace whose parent is the save's span; the outcome's span links to it. Both
/// sides run in helper processes, each with swift-distributed-tracing's in-memory tracer
/// bootstrapped (this test process keeps no global tracer).
@Suite(.timeLimit(.minutes(3)))
struct TracingTests {
    @Test func aRunInAnotherProcessIsAChildOfTheSaveSpan() async throws {
        let folder = try TemporaryDirectory()
        let path = folder.path("trace.sqlite")
        _ = try await TaskDatabase.sqlite(path: path)

        let save = try await Self.lines(of: ["trace-save", path, "trace-1", "k1"])
        let request = try #require(save["request"]), saved = try #require(save["save"])
        #expect(saved[0] == request[0], "the save's span is in the request's trace")
        #expect(saved[2] == request[1], "and its parent is the request's span")

        let serve = try await Self.lines(of: ["trace-serve", path])
        let handle = try #require(serve["handle"])
        #expect(handle[0] == saved[0], "the run is a span of the save's trace: \(handle) vs \(saved)")
        #expect(handle[1] == saved[1], "whose parent is the save's span")
        #expect(handle[2] == "consumer")
        let outcome = try #require(serve["outcome"])
        #expect(outcome == [saved[0]], "the outcome's span links to the action's trace: \(outcome)")
    }

    /// A plain parallel action: its run is a child of its save's span in the other process, and
    /// the spans that claimed it and stored its outcome link to its trace.
    @Test func aPlainParallelActionsRunClaimAndOutcomeJoinItsSavesTrace() async throws {
        let folder = try TemporaryDirectory()
        let path = folder.path("trace.sqlite")
        _ = try await TaskDatabase.sqlite(path: path)

        let save = try await Self.lines(of: ["trace-save", path, "trace-p", "p1", "parallel"])
        let saved = try #require(save["save"])
        let serve = try await Self.lines(of: ["trace-serve", path])
        let handle = try #require(serve["handle"])
        #expect(handle[0] == saved[0] && handle[1] == saved[1], "the run is a child of the save's span: \(handle) vs \(saved)")
        #expect(try #require(serve["claim"]) == [saved[0]], "the claim's span links to the action's trace: \(serve)")
        #expect(try #require(serve["outcome"]) == [saved[0]], "the outcome's span links to it: \(serve)")
    }

    /// Runs the helper to its end; its stdout lines by first word.
    private static func lines(of arguments: [String]) async throws -> [String: [String]] {
        let run = try CrashHelperRun(arguments: arguments)
        var all = await run.lines.values(count: 1)
        while all.last != "EOF" { all = await run.lines.values(count: all.count + 1) }
        var lines: [String: [String]] = [:]
        for line in all.dropLast() {
            let words = line.split(separator: " ").map(String.init)
            guard let first = words.first else { continue }
            #expect(first != "error", "\(arguments[0]): \(line)")
            lines[first] = Array(words.dropFirst())
        }
        return lines
    }
}

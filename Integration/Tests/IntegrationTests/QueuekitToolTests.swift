import Foundation
import Testing

/// The `queuekit` binary run as a subprocess, on real SQLite files.
@Suite(.timeLimit(.minutes(1)))
struct QueuekitToolTests {
    private static let fast = ["--backoff-ms", "1", "--max-backoff-ms", "2", "--work-ms", "0"]

    @Test func enqueueWorkAndStatsRunUploadsToTheEndAndDeadLetterThePermanentFailure() async throws {
        let folder = try TemporaryDirectory()
        let db = ["--database", "sqlite:\(folder.path("q.sqlite"))"]
        let tool = QueuekitBinary.self

        for (queue, extra) in [("alice", ["--count", "3"]), ("bob", ["--count", "2", "--fail-times", "1"]), ("carol", ["--permanent"])] {
            let run = try await tool.run(["enqueue", "--queue", queue, "--key-prefix", queue] + extra + db, in: folder.url)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout.contains("on uploads-\(queue)"))
        }
        let before = try await tool.run(["stats"] + db, in: folder.url)
        #expect(before.status == 0)
        let beforeRows = before.stdout.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        #expect(beforeRows.contains(["uploads-alice", "3", "0", "ready"]))
        #expect(beforeRows.contains(["uploads-bob", "2", "0", "ready"]))
        #expect(beforeRows.contains(["uploads-carol", "1", "0", "ready"]))
        #expect(before.stdout.contains("total: 3 queue(s), 6 pending, 0 paused, 0 dead-lettered"))

        let work = try await tool.run(["work", "--max-attempts", "3"] + Self.fast + db, in: folder.url)
        #expect(work.status == 0, "\(work.stderr)")
        #expect(work.stderr.isEmpty)
        // bob's two uploads fail once each; carol's fails twice and is dead-lettered on the third.
        #expect(work.stdout.contains("handled 6: 5 uploaded, 1 dead-lettered, 4 retries"))

        let after = try await tool.run(["stats"] + db, in: folder.url)
        #expect(after.stdout.contains("total: 0 queue(s), 0 pending, 0 paused, 1 dead-lettered"))
        #expect(after.stdout.contains("deadletter-carol"))
        let list = try await tool.run(["list", "--dead-letter"] + db, in: folder.url)
        #expect(list.stdout.contains("carol-1"))
        #expect(list.stdout.contains("dead after 3 attempts"))

        let retry = try await tool.run(["retry", "carol", "--simulate-fix"] + db, in: folder.url)
        #expect(retry.status == 0, "\(retry.stderr)")
        #expect(retry.stdout.contains("uploads-carol: 1 dead letter(s) moved back"))
        let again = try await tool.run(["work"] + Self.fast + db, in: folder.url)
        #expect(again.stdout.contains("handled 1: 1 uploaded, 0 dead-lettered, 0 retries"))
        let final = try await tool.run(["stats"] + db, in: folder.url)
        #expect(final.stdout.contains("total: 0 queue(s), 0 pending, 0 paused, 0 dead-lettered"))
    }

    @Test func aWorkerRunsWhatAnotherProcessEnqueuesAndDoesNotExitWhileItIsStored() async throws {
        let folder = try TemporaryDirectory()
        let db = ["--database", "sqlite:\(folder.path("q.sqlite"))"]
        let tool = QueuekitBinary.self
        let enqueued = try await tool.run(["enqueue", "--queue", "alice", "--count", "20", "--key-prefix", "alice"] + db, in: folder.url)
        #expect(enqueued.status == 0, "\(enqueued.stderr)")
        let permanent = try await tool.run(["enqueue", "--queue", "carol", "--permanent"] + db, in: folder.url)
        #expect(permanent.status == 0, "\(permanent.stderr)")
        // carol's upload fails, waits 3 s for its retry, then is dead-lettered: the worker is busy
        // for at least 3 s, and the second enqueue lands meanwhile.
        let worker = try RunningTool(["work", "--max-attempts", "2", "--backoff-ms", "3000", "--work-ms", "0"] + db, in: folder.url)
        await worker.output(containing: "done")
        let more = try await tool.run(["enqueue", "--queue", "bob", "--count", "30", "--key-prefix", "bob"] + db, in: folder.url)
        #expect(more.status == 0, "\(more.stderr)")

        // A second worker on the same file is refused with one clear line, not run beside the first.
        let second = try await tool.run(["work"] + db, in: folder.url)
        #expect(second.status == 1, "\(second.stdout)")
        #expect(second.stderr.contains("Another process runs a broker named \"uploads\""), "\(second.stderr)")

        let run = await worker.finish()
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("handled 51: 50 uploaded, 1 dead-lettered"), "\(run.stdout)")
        let stats = try await tool.run(["stats"] + db, in: folder.url)
        #expect(stats.stdout.contains("total: 0 queue(s), 0 pending"), "\(stats.stdout)")
    }

    @Test func demoRunsToItsSummaryAndASecondRunEnqueuesNothingAgain() async throws {
        let folder = try TemporaryDirectory()
        let args = ["demo", "--actions", "300", "--users", "6", "--permanent-rate", "0.02", "--max-attempts", "3"]
            + Self.fast + ["--database", "sqlite:\(folder.path("demo.sqlite"))"]
        let first = try await QueuekitBinary.run(args, in: folder.url)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("enqueued 300 uploads over 6 user queues"))
        #expect(first.stdout.contains("queuekit demo: summary"))
        #expect(first.stdout.contains("still queued      0"))
        #expect(first.stdout.contains("status            complete"))
        let uploaded = try #require(Self.value(of: "uploaded", in: first.stdout))
        let dead = try #require(Self.value(of: "dead-lettered", in: first.stdout))
        #expect(uploaded + dead == 300)
        #expect(dead > 0)

        let second = try await QueuekitBinary.run(args, in: folder.url)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(!second.stdout.contains("enqueued 300"))
        #expect(second.stdout.contains("resuming: 300 of 300 uploads were enqueued by an earlier run"))
        #expect(Self.value(of: "uploaded", in: second.stdout) == uploaded)
        #expect(second.stdout.contains("this run          0 handled"))
    }

    @Test func demoStoppedWithCtrlCResumesWhereItLeftOffAndFinishesTheWorkload() async throws {
        let folder = try TemporaryDirectory()
        // 30 uploads of 100 ms per queue: at least 3 s of work, so SIGINT always lands mid-run,
        // however loaded the machine is.
        let args = ["demo", "--actions", "600", "--users", "20", "--work-ms", "100", "--backoff-ms", "1", "--max-backoff-ms", "2",
                    "--database", "sqlite:\(folder.path("demo.sqlite"))"]
        let running = try RunningTool(args, in: folder.url)
        await running.output(containing: "demo   0%")
        running.interrupt()
        let first = await running.finish()
        #expect(first.status == 130, "\(first.stderr)")
        #expect(first.stdout.contains("status            interrupted"))
        let queuedAfterFirst = try #require(Self.value(of: "still", in: first.stdout.replacingOccurrences(of: "still queued", with: "still")))
        #expect(queuedAfterFirst > 0)

        let second = try await QueuekitBinary.run(args, in: folder.url)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stdout.contains("resuming: 600 of 600 uploads were enqueued by an earlier run"))
        #expect(second.stdout.contains("status            complete"))
        let uploaded = try #require(Self.value(of: "uploaded", in: second.stdout))
        let dead = try #require(Self.value(of: "dead-lettered", in: second.stdout))
        #expect(uploaded + dead == 600)
        #expect(second.stdout.contains("this run          \(queuedAfterFirst.formatted(.number.grouping(.automatic).locale(Locale(identifier: "en_US")))) handled"))
    }

    @Test(arguments: [
        (["stats", "--database", "sqlite:missing.sqlite"], 1, "queuekit: no database at missing.sqlite"),
        (["work", "--database", "sqlite:corrupt.sqlite"], 1, "queuekit: corrupt.sqlite is not a QueueKit database or is corrupt"),
        (["stats", "--bogus"], 64, "queuekit: Unknown option '--bogus'"),
        (["retry", "nobody", "--database", "sqlite:good.sqlite"], 1, "queuekit: no queue named 'nobody'"),
        (["list", "--database", "postgres://db"], 64, "queuekit: --database expects sqlite:PATH"),
        (["enqueue", "--queue", "a/b", "--database", "sqlite:good.sqlite"], 64, "queuekit: --queue takes a user name"),
        // The fuzz target's regression inputs (Fuzz/Regressions/QueuekitArgumentsFuzzer/): these trapped.
        (["work", "--work-ms", "inf", "--database", "sqlite:good.sqlite"], 64, "queuekit: --work-ms takes at most 3600000"),
        (["demo", "--work-ms", "1e300", "--database", "sqlite:good.sqlite"], 64, "queuekit: --work-ms takes at most 3600000"),
    ])
    func badInputGetsOneLineOnStderrAndANonZeroStatus(arguments: [String], status: Int32, message: String) async throws {
        let folder = try TemporaryDirectory()
        try Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }).write(to: folder.url.appendingPathComponent("corrupt.sqlite"))
        let setup = try await QueuekitBinary.run(["enqueue", "--queue", "alice", "--database", "sqlite:good.sqlite"], in: folder.url)
        #expect(setup.status == 0, "\(setup.stderr)")

        let run = try await QueuekitBinary.run(arguments, in: folder.url)
        #expect(run.status == status)
        #expect(run.stderrLines.count == 1)
        #expect(run.stderr.hasPrefix(message), "\(run.stderr)")
        #expect(run.stdout.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: folder.path("missing.sqlite")))
    }

    /// The number in a summary row such as `  uploaded          297`.
    private static func value(of label: String, in text: String) -> Int? {
        for line in text.split(separator: "\n") {
            let words = line.split(separator: " ")
            if words.first.map(String.init) == label, words.count > 1 {
                return Int(words[1].replacingOccurrences(of: ",", with: ""))
            }
        }
        return nil
    }
}

import Foundation
import TaskBroker
import Testing

/// The `queuekit` binary run as a subprocess, on real SQLite files and on the real PostgreSQL
/// server that `make test-all` starts.
@Suite(.timeLimit(.minutes(1)))
struct QueuekitToolTests {
    private static let fast = ["--backoff-ms", "1", "--max-backoff-ms", "2", "--work-ms", "0"]

    @Test(arguments: ToolBackend.allCases)
    func enqueueWorkAndStatsRunUploadsToTheEndAndDeadLetterThePermanentFailure(backend: ToolBackend) async throws {
        let folder = try TemporaryDirectory()
        let db = try backend.databaseArguments(in: folder)
        let tool = QueuekitBinary.self

        for (queue, extra) in [("alice", ["--count", "3"]), ("bob", ["--count", "2", "--fail-times", "1"]), ("carol", ["--permanent"])] {
            let run = try await tool.run(["enqueue", "--queue", queue, "--key-prefix", queue] + extra + db, in: folder.url)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout.contains("on uploads-\(queue)"))
        }
        let before = try await tool.run(["stats"] + db, in: folder.url)
        #expect(before.status == 0)
        let beforeRows = before.stdout.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        #expect(beforeRows.contains(["uploads-alice", "3", "0", "0", "ready"]))
        #expect(beforeRows.contains(["uploads-bob", "2", "0", "0", "ready"]))
        #expect(beforeRows.contains(["uploads-carol", "1", "0", "0", "ready"]))
        #expect(before.stdout.contains("total: 3 queue(s), 6 pending, 0 paused, 0 dead-lettered"))

        let work = try await tool.run(["work", "--max-attempts", "3"] + Self.fast + db, in: folder.url)
        #expect(work.status == 0, "\(work.stderr)")
        #expect(work.stderr.isEmpty)
        // bob's two uploads fail once each; carol's fails twice and is dead-lettered on the third.
        #expect(work.stdout.contains("handled 6: 5 uploaded, 1 dead-lettered, 4 retries"))

        let after = try await tool.run(["stats"] + db, in: folder.url)
        #expect(after.stdout.contains("total: 0 queue(s), 0 pending, 0 paused, 1 dead-lettered"))
        // carol's upload is a dead letter of her own queue, which holds nothing live.
        let afterRows = after.stdout.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        #expect(afterRows.contains(["uploads-carol", "0", "1", "-", "empty"]), "\(after.stdout)")
        let list = try await tool.run(["list", "--dead-letter"] + db, in: folder.url)
        #expect(list.stdout.contains("dead letters (1)"), "\(list.stdout)")
        #expect(list.stdout.contains("carol-1  uploads-carol, FILE_0001.jpg, dead after 3 attempt(s): HTTP 413"), "\(list.stdout)")

        let retry = try await tool.run(["retry", "carol", "--simulate-fix"] + db, in: folder.url)
        #expect(retry.status == 0, "\(retry.stderr)")
        #expect(retry.stdout.contains("uploads-carol: 1 dead letter(s) replayed"))
        let again = try await tool.run(["work"] + Self.fast + db, in: folder.url)
        #expect(again.stdout.contains("handled 1: 1 uploaded, 0 dead-lettered, 0 retries"))
        let final = try await tool.run(["stats"] + db, in: folder.url)
        #expect(final.stdout.contains("total: 0 queue(s), 0 pending, 0 paused, 0 dead-lettered"))

        let enqueued = try await tool.run(["enqueue", "--queue", "dave", "--count", "4"] + db, in: folder.url)
        #expect(enqueued.status == 0, "\(enqueued.stderr)")
        let purge = try await tool.run(["purge", "dave"] + db, in: folder.url)
        #expect(purge.status == 0, "\(purge.stderr)")
        #expect(purge.stdout.contains("purged 4 upload(s) from 1 queue(s)"), "\(purge.stdout)")
        let empty = try await tool.run(["list"] + db, in: folder.url)
        #expect(empty.stdout == "no stored uploads\n")
    }

    /// `--delay` stores uploads to start later; `pause` holds a queue in every worker until
    /// `resume`, and a worker with nothing else to do stops with one line naming the way out.
    @Test(arguments: ToolBackend.allCases)
    func delayedUploadsWaitAndAPausedQueueWaitsForResume(backend: ToolBackend) async throws {
        let folder = try TemporaryDirectory()
        let db = try backend.databaseArguments(in: folder)
        let tool = QueuekitBinary.self
        let alice = try await tool.run(["enqueue", "--queue", "alice", "--count", "2", "--key-prefix", "alice"] + db, in: folder.url)
        #expect(alice.status == 0, "\(alice.stderr)")
        let later = try await tool.run(["enqueue", "--queue", "bob", "--key-prefix", "bob", "--delay", "1"] + db, in: folder.url)
        #expect(later.stdout.contains("enqueued 1 upload(s) on uploads-bob, to start in 1.0 s"), "\(later.stdout)")
        // An hour ahead, so that `list` shows it still waiting however slow the machine; then cancelled.
        let hour = try await tool.run(["enqueue", "--queue", "dave", "--key-prefix", "dave", "--delay", "3600"] + db, in: folder.url)
        #expect(hour.status == 0, "\(hour.stderr)")
        let listed = try await tool.run(["list", "--queue", "dave"] + db, in: folder.url)
        #expect(listed.stdout.contains("dave-1  FILE_0001.jpg, 1,000,001 bytes, starts in 3"), "\(listed.stdout)")
        let cancelled = try await tool.run(["delete", "dave-1", "--collection", "uploads"] + db, in: folder.url)
        #expect(cancelled.stdout == "deleted uploads/dave-1\n", "\(cancelled.stderr)")

        let pause = try await tool.run(["pause", "alice"] + db, in: folder.url)
        #expect(pause.status == 0, "\(pause.stderr)")
        let stats = try await tool.run(["stats"] + db, in: folder.url)
        let rows = stats.stdout.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        #expect(rows.contains(["uploads-alice", "2", "0", "0", "paused", "by", "an", "operator"]), "\(stats.stdout)")

        // The worker runs bob's upload once its time comes, then finds only the paused queue left.
        let held = try await tool.run(["work"] + Self.fast + db, in: folder.url)
        #expect(held.status == 1, "\(held.stdout)")
        #expect(held.stdout.contains("handled 1: 1 uploaded"), "\(held.stdout)")
        #expect(held.stderrLines == ["queuekit: what is left waits in uploads-alice, paused by an operator: `queuekit resume alice` runs it again."])

        let resume = try await tool.run(["resume", "alice"] + db, in: folder.url)
        #expect(resume.stdout.contains("resumed uploads-alice"), "\(resume.stdout)")
        let run = try await tool.run(["work"] + Self.fast + db, in: folder.url)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("handled 2: 2 uploaded"), "\(run.stdout)")
    }

    @Test func aWorkerRunsWhatAnotherProcessEnqueuesAndDoesNotExitWhileItIsStored() async throws {
        let folder = try TemporaryDirectory()
        let db = ["--database", "sqlite:\(folder.path("q.sqlite"))"]
        let tool = QueuekitBinary.self
        let enqueued = try await tool.run(["enqueue", "--queue", "alice", "--count", "20", "--key-prefix", "alice"] + db, in: folder.url)
        #expect(enqueued.status == 0, "\(enqueued.stderr)")
        let permanent = try await tool.run(["enqueue", "--queue", "carol", "--permanent"] + db, in: folder.url)
        #expect(permanent.status == 0, "\(permanent.stderr)")
        // carol's upload fails, waits 10 s for its retry, then is dead-lettered: the worker is busy
        // for at least 10 s (a margin for a loaded machine), and the second enqueue and the second
        // worker land meanwhile.
        let worker = try RunningTool(["work", "--max-attempts", "2", "--backoff-ms", "10000", "--work-ms", "0"] + db, in: folder.url)
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

    /// An upload the tool cannot decode (written by another program, or a newer version) pauses
    /// its queue until `queuekit retry`. With nothing else left, `work` waited for it forever,
    /// printing nothing; it now stops with one line that names the queue and the way out.
    @Test func workStopsWithAnErrorWhenWhatIsLeftWaitsForRetry() async throws {
        let folder = try TemporaryDirectory()
        let path = folder.path("q.sqlite")
        let db = ["--database", "sqlite:\(path)"]
        let enqueued = try await QueuekitBinary.run(["enqueue", "--queue", "bob", "--count", "3"] + db, in: folder.url)
        #expect(enqueued.status == 0, "\(enqueued.stderr)")
        struct Foreign: TaskQueueAction {
            var key = "foreign"
            var collection = "uploads"
            var queueName = "uploads-alice"
            var shape = "not an upload"
        }
        let database = try await TaskDatabase.sqlite(path: path)
        try await database.save(Foreign())

        let run = try await QueuekitBinary.run(["work"] + Self.fast + db, in: folder.url)
        #expect(run.status == 1, "\(run.stdout)")
        #expect(run.stdout.contains("handled 3: 3 uploaded"), "\(run.stdout)")
        #expect(run.stderrLines.count == 1)
        #expect(run.stderr.contains("uploads-alice is paused until restarted"), "\(run.stderr)")
        #expect(run.stderr.contains("queuekit retry alice"), "\(run.stderr)")
    }

    @Test func aWatchingWorkerKeepsTakingWhatOtherProcessesEnqueueUntilSIGINT() async throws {
        let folder = try TemporaryDirectory()
        let db = ["--database", "sqlite:\(folder.path("q.sqlite"))"]
        let tool = QueuekitBinary.self
        let first = try await tool.run(["enqueue", "--queue", "alice", "--key-prefix", "alice"] + db, in: folder.url)
        #expect(first.status == 0, "\(first.stderr)")
        let worker = try RunningTool(["work", "--watch", "--work-ms", "0"] + db, in: folder.url)
        await worker.output(containing: "done 1 |")
        // The store is empty now, and the worker still runs: it takes what another process enqueues.
        let more = try await tool.run(["enqueue", "--queue", "bob", "--count", "5", "--key-prefix", "bob"] + db, in: folder.url)
        #expect(more.status == 0, "\(more.stderr)")
        await worker.output(containing: "done 6 |")
        worker.interrupt()
        let run = await worker.finish()
        // A signal is how a watching worker stops: not an interruption to resume.
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("handled 6: 6 uploaded, 0 dead-lettered"), "\(run.stdout)")
        #expect(!run.stdout.contains("run again"), "\(run.stdout)")
    }

    @Test(arguments: ToolBackend.allCases)
    func demoRunsToItsSummaryAndASecondRunEnqueuesNothingAgain(backend: ToolBackend) async throws {
        let folder = try TemporaryDirectory()
        let db = try backend.databaseArguments(in: folder)
        let args = ["demo", "--actions", "300", "--users", "6", "--permanent-rate", "0.02", "--max-attempts", "3"] + Self.fast + db
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
        // A new workload's showcase: the later upload starts no earlier than 2 s after its save,
        // and the paused queue's first upload no earlier than its resume at 1 s.
        let later = try #require(Self.startTime(in: first.stdout, row: "run later"))
        #expect(later >= 2.0, "\(first.stdout)")
        let paused = try #require(Self.startTime(in: first.stdout, row: "pause"))
        #expect(paused >= 1.0, "\(first.stdout)")
        // Its schedule: two ticks, each enqueued once, and run before the run ended ("still queued 0" above).
        #expect(first.stdout.contains("digest every 1 s: 2 tick(s) enqueued once each"), "\(first.stdout)")
        #expect(first.stdout.contains("their uploads ran in uploads-digest"), "\(first.stdout)")
        let schedules = try await QueuekitBinary.run(["schedules", "--json"] + db, in: folder.url)
        #expect(schedules.status == 0, "\(schedules.stderr)")
        let listed = try JSONSerialization.jsonObject(with: Data(schedules.stdout.utf8)) as? [[String: Any]]
        #expect(listed?.count == 1 && listed?.first?["name"] as? String == "digest", "\(schedules.stdout)")
        #expect((listed?.first?["lastKey"] as? String)?.hasPrefix("showcase-digest@") == true, "\(schedules.stdout)")

        let second = try await QueuekitBinary.run(args, in: folder.url)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(!second.stdout.contains("enqueued 300"))
        #expect(second.stdout.contains("resuming: 300 of 300 uploads were enqueued by an earlier run"))
        #expect(Self.value(of: "uploaded", in: second.stdout) == uploaded)
        #expect(second.stdout.contains("this run          0 handled"))

        // --fresh starts over: on PostgreSQL by deleting the stored uploads and the ledger.
        let fresh = try await QueuekitBinary.run(args + ["--fresh"], in: folder.url)
        #expect(fresh.status == 0, "\(fresh.stderr)")
        #expect(fresh.stdout.contains("enqueued 300 uploads over 6 user queues"), "\(fresh.stdout)")
        #expect(Self.value(of: "uploaded", in: fresh.stdout) == uploaded)
        #expect(Self.value(of: "dead-lettered", in: fresh.stdout) == dead)
    }

    @Test func workersOnOnePostgreSQLShareTheQueuesAndEveryOneExitsWhenNothingIsLeft() async throws {
        let folder = try TemporaryDirectory()
        let db = try ToolBackend.postgres.databaseArguments(in: folder)
        let enqueued = try await QueuekitBinary.run(["enqueue", "--queue", "alice", "--count", "40", "--key-prefix", "a"] + db, in: folder.url)
        #expect(enqueued.status == 0, "\(enqueued.stderr)")
        for user in ["bob", "carol", "dave"] {
            let more = try await QueuekitBinary.run(["enqueue", "--queue", user, "--count", "40", "--key-prefix", user] + db, in: folder.url)
            #expect(more.status == 0, "\(more.stderr)")
        }
        // Two workers at once: neither is refused, each handles part of the 160 uploads, and both
        // exit once the store is empty, including the one whose own share ended first.
        async let first = QueuekitBinary.run(["work", "--work-ms", "5", "--concurrency", "2"] + db, in: folder.url)
        async let second = QueuekitBinary.run(["work", "--work-ms", "5", "--concurrency", "2"] + db, in: folder.url)
        let runs = try await [first, second]
        var handled = 0
        for run in runs {
            #expect(run.status == 0, "\(run.stderr)")
            let line = try #require(run.stdout.split(separator: "\n").last { $0.hasPrefix("handled ") })
            handled += try #require(Int(line.dropFirst("handled ".count).prefix { $0.isNumber }))
        }
        #expect(handled == 160)
        let stats = try await QueuekitBinary.run(["stats"] + db, in: folder.url)
        #expect(stats.stdout.contains("total: 0 queue(s), 0 pending"), "\(stats.stdout)")
    }

    @Test func demoClusterKillsAWorkerHalfwayAndTheOthersTakeItsQueuesOverInOrder() async throws {
        let folder = try TemporaryDirectory()
        // A 2 s lease, renewed every 0.67 s: with 1 s, a debug-build worker on a loaded 2-core
        // machine once renewed too late, and a live worker's queue was taken over under it.
        let args = ["demo-cluster", "--actions", "1000", "--users", "15", "--max-attempts", "3"]
            + Self.fast + ["--work-ms", "1", "--concurrency", "8"] + (try ToolBackend.postgres.databaseArguments(in: folder, lease: 2))
        let run = try await QueuekitBinary.run(args, in: folder.url)
        #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
        #expect(run.stdout.contains("started 3 workers"))
        #expect(run.stdout.contains("killed worker 2"), "\(run.stdout)")
        #expect(run.stdout.contains("0 overlapping runs in a queue, 0 out of order, 0 unexplained re-runs"), "\(run.stdout)")
        #expect(run.stdout.contains("status            complete"), "\(run.stdout)")
        let uploaded = try #require(Self.value(of: "uploaded", in: run.stdout))
        let dead = try #require(Self.value(of: "dead-lettered", in: run.stdout))
        #expect(uploaded + dead == 1000)
        #expect(Self.value(of: "still", in: run.stdout.replacingOccurrences(of: "still queued", with: "still")) == 0)
    }

    @Test func demoStoppedWithCtrlCResumesWhereItLeftOffAndFinishesTheWorkload() async throws {
        let folder = try TemporaryDirectory()
        // 30 uploads of 250 ms per queue: at least 7.5 s of work, so SIGINT lands mid-run even
        // when the machine is loaded enough to delay this test's reading of the output.
        let args = ["demo", "--actions", "600", "--users", "20", "--work-ms", "250", "--backoff-ms", "1", "--max-backoff-ms", "2",
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
        (["list", "--database", "mysql://db"], 64, "queuekit: --database expects sqlite:PATH or postgres://"),
        (["list", "--database", "postgres://:5432/x"], 64, "queuekit: --database postgres://:5432/x: "),
        (["stats", "--database", "postgres://app:secret@127.0.0.1:1/app"], 1, "queuekit: cannot open postgres://app:***@127.0.0.1:1/app: "),
        // A password with an unencoded '#' (the URL does not parse): quoted without it.
        (["stats", "--database", "postgres://app:s3cr#t@127.0.0.1:1/app"], 64, "queuekit: --database postgres://app:***@127.0.0.1:1/app: "),
        // The URL without --database, as psql takes it: the argument parser's message quotes it.
        (["stats", "postgres://app:secret@127.0.0.1:1/app"], 64, "queuekit: Unexpected argument 'postgres://app:***@127.0.0.1:1/app'"),
        // A queue name that looks like a URL, quoted back in the error.
        (["retry", "postgres://app:secret@db/app", "--database", "sqlite:good.sqlite"], 1, "queuekit: no queue named 'postgres://app:***@db/app' in good.sqlite"),
        (["demo-cluster", "--database", "sqlite:good.sqlite"], 64, "queuekit: demo-cluster needs a database that several processes share"),
        (["enqueue", "--queue", "a/b", "--database", "sqlite:good.sqlite"], 64, "queuekit: --queue takes a user name"),
        (["enqueue", "--queue", "a", "--delay", "nan", "--database", "sqlite:good.sqlite"], 64, "queuekit: --delay takes seconds from 0 to"),
        (["enqueue", "--queue", "a", "--delay=-1", "--database", "sqlite:good.sqlite"], 64, "queuekit: --delay takes seconds from 0 to"),
        (["pause", "--database", "sqlite:good.sqlite"], 64, "queuekit: Missing expected argument"),
        (["replay", "k", "--database", "sqlite:good.sqlite"], 64, "queuekit: Missing expected argument '--collection"),
        (["discard", "k", "--collection", "c", "--database", "sqlite:good.sqlite"], 1, "queuekit: no dead letter c/k in good.sqlite"),
        (["delete", "k", "--collection", "c", "--database", "sqlite:good.sqlite"], 1, "queuekit: no action c/k in good.sqlite"),
        (["queues", "--database", "postgres://app:secret@127.0.0.1:1/app"], 1, "queuekit: cannot open postgres://app:***@127.0.0.1:1/app: "),
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
        #expect(!run.stderr.contains("secret") && !run.stderr.contains("s3cr"), "no password in \(run.stderr)")
        #expect(!run.stderr.contains("PSQLError"), "no generic postgres-nio sentence in \(run.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.path("missing.sqlite")))
    }

    /// The seconds in a showcase row's `started at +2.01 s`.
    private static func startTime(in text: String, row label: String) -> Double? {
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("  \(label)  ") }),
              let range = line.range(of: "started at +") else { return nil }
        return Double(line[range.upperBound...].prefix { $0.isNumber || $0 == "." })
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

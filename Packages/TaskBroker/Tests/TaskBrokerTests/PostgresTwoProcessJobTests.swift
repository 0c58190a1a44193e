// PostgreSQL only: not compiled in a build without TaskBrokerPostgres (the AddressSanitizer run).
#if canImport(TaskBrokerPostgres)
import AsyncPrimitivesTesting
import Foundation
import TaskBroker
import Testing

/// The job-system promises that are about several processes, with a real second process (the
/// `TaskBrokerCrashHelper` executable) on the PostgreSQL server that `make test-all` started.
@Suite(.timeLimit(.minutes(3)))
struct PostgresTwoProcessJobTests {
    /// This process pauses a queue that a broker of another process serves: that broker starts
    /// nothing of it (while it runs five actions of another queue saved in the same transaction)
    /// until this process resumes it.
    @Test func aPauseByOneProcessStopsTheBrokerOfAnother() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open()
        let worker = try CrashHelperRun(arguments: ["pg-serve", try PostgresTestServer.url(), store.schema])
        #expect(await worker.line(after: 0) == "ready")

        try await database.pauseQueues(["crash-held"])
        try await database.save(
            [CrashAction(key: "held-1", queueName: "crash-held", index: 0)]
                + (0..<5).map { CrashAction(key: "free-\($0)", queueName: "crash-free", index: $0) }
        )
        // The other queue's five actions run one after another; an unpaused crash-held would have
        // run beside the first of them.
        let ran = await worker.lines.values(count: 6)
        #expect(Array(ran.dropFirst()) == (0..<5).map { "done free-\($0)" })
        let held = try #require(try await database.snapshot().first { $0.name == "crash-held" })
        #expect(held.pending == 1)
        #expect(held.pausedByOperator)

        try await database.resumeQueues(["crash-held"])
        #expect(await worker.line(after: 6) == "done held-1")
        await worker.finish()
    }

    /// Two processes save the same 200 actions with `saveIfAbsent` at the same moment: each is
    /// stored once, and the two processes' counts of what they stored add up to 200.
    @Test func saveIfAbsentRacingFromTwoProcessesStoresEachActionOnce() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open()
        let count = 200
        let other = try CrashHelperRun(arguments: ["pg-save-if-absent", try PostgresTestServer.url(), store.schema, String(count)])
        #expect(await other.line(after: 0) == "ready")

        other.send("go")
        var storedHere = 0
        for index in 0..<count {
            let action = CrashAction(key: "unique-\(index)", queueName: "crash-unique-\(index % 5)", index: index)
            if try await database.saveIfAbsent(action) { storedHere += 1 }
        }
        let reply = await other.line(after: 1)
        let storedThere = try #require(Int(reply.dropFirst("stored ".count)), "\(reply)")
        #expect(storedHere + storedThere == count)
        let pending = try await database.snapshot().filter { $0.name.hasPrefix("crash-unique-") }.map(\.pending)
        #expect(pending == Array(repeating: count / 5, count: 5))
        await other.waitForExit()
    }

    /// Three processes run the same schedule, every second, for 20 s: each tick is enqueued by
    /// exactly one of them, none is missed, and every tick is contended (all three try it).
    @Test func threeProcessesRunningOneScheduleEnqueueEachTickOnce() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open()
        let url = try PostgresTestServer.url()
        let helpers = try (0..<3).map { _ in try CrashHelperRun(arguments: ["pg-schedule", url, store.schema, "20"]) }
        for helper in helpers {
            #expect(await helper.line(after: 0) == "ready")
        }
        for helper in helpers {
            helper.send("go")
        }
        var outputs: [[String]] = []
        for helper in helpers {
            var lines: [String] = []
            while true {
                let line = await helper.line(after: lines.count + 1)
                if ["done", "EOF", "cancelled"].contains(line) || line.hasPrefix("error") {
                    #expect(line == "done")
                    break
                }
                lines.append(line)
            }
            await helper.waitForExit()
            outputs.append(lines)
        }
        #expect(outputs.joined().allSatisfy { $0.hasPrefix("enqueued ") || $0.hasPrefix("elsewhere ") }, "no failure: \(outputs)")
        let enqueued = outputs.joined().filter { $0.hasPrefix("enqueued ") }.map { String($0.dropFirst("enqueued ".count)) }
        #expect(Set(enqueued).count == enqueued.count, "a tick enqueued twice: \(enqueued.sorted())")
        let seconds = try enqueued.map { key in
            try Date(String(key.dropFirst("every-second@".count)), strategy: .iso8601).timeIntervalSince1970
        }.sorted()
        let first = try #require(seconds.first)
        let last = try #require(seconds.last)
        #expect(seconds.count >= 18, "ticks in 20 s: \(seconds.count)")
        #expect(seconds == Array(stride(from: first, through: last, by: 1)), "a tick missed between the first and the last: \(seconds)")
        let perTick = Dictionary(grouping: outputs.joined().map { $0.split(separator: " ").last.map(String.init) ?? "" }, by: { $0 }).mapValues(\.count)
        let contended = perTick.values.filter { $0 == 3 }.count
        #expect(contended >= seconds.count - 2, "ticks all three processes tried: \(contended) of \(seconds.count)")
        let byProcess = outputs.map { $0.filter { $0.hasPrefix("enqueued ") }.count }
        print("schedule across 3 processes: \(seconds.count) ticks in 20 s, each enqueued once (by process: \(byProcess)); \(contended) tried by all three")
        #expect(try await database.snapshot().first { $0.name == "crash-ticks" }?.pending == seconds.count)
    }

    /// Two processes share a rate limit of 20 starts a second over 600 actions in 60 queues:
    /// measured over 10 s from the first start, they stay within it and use it (at least 90 %).
    @Test func twoProcessesSharingARateLimitStayWithinItAndUseIt() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open()
        try await database.save((0..<600).map { CrashAction(key: "rate-\($0)", queueName: "crash-rate-\($0 % 60)", index: $0) })
        let url = try PostgresTestServer.url()
        let workers = try (0..<2).map { _ in try CrashHelperRun(arguments: ["pg-rate", url, store.schema]) }
        for worker in workers {
            #expect(await worker.line(after: 0) == "ready")
        }
        // 20 a second: 250 starts take about 12.5 s. Both workers' lines, as they come.
        let lines = EventCollector<String>()
        await withTaskGroup(of: Void.self) { group in
            for (index, worker) in workers.enumerated() {
                group.addTask {
                    var read = 1
                    while !Task.isCancelled {
                        let line = await worker.line(after: read)
                        read += 1
                        if line == "cancelled" || line == "EOF" { return }
                        lines.record("\(index) \(line)")
                    }
                }
            }
            _ = await lines.values(count: 250)
            group.cancelAll()
        }
        var starts: [(worker: Int, at: Int64)] = []
        for line in lines.values {
            let parts = line.split(separator: " ")
            guard parts.count == 4, parts[1] == "start", let worker = Int(parts[0]), let at = Int64(parts[3]) else {
                Issue.record("not a start: \(line)")
                continue
            }
            starts.append((worker, at))
        }
        for worker in workers {
            await worker.finish()
        }
        let times = starts.map(\.at).sorted()
        let first = try #require(times.first)
        let inTenSeconds = times.filter { $0 < first + 10_000 }.count
        let byWorker = [0, 1].map { index in starts.filter { $0.worker == index && $0.at < first + 10_000 }.count }
        // The busiest second of start times is printed, not asserted: the limit holds for the
        // starts as storage granted them, and a start follows its grant by a delay that a loaded
        // machine stretches (20 on an idle machine, 24 once in CI beside the whole suite).
        let busiestSecond = times.indices.map { index in times[index...].prefix { $0 < times[index] + 1_000 }.count }.max() ?? 0
        print("rate limit 20/s shared by 2 processes: \(inTenSeconds) starts in 10 s (\(byWorker[0]) + \(byWorker[1])), busiest second \(busiestSecond)")
        #expect(inTenSeconds <= 201, "within 20 a second over 10 s: \(inTenSeconds)")
        // Used, not merely kept: a limit counted once per process, or each start counted twice,
        // gives at most 100. Three quarters, not all of it: on a loaded 2-core machine each start
        // waits for its grant's round trip to the server (156 once beside a build, 180 in CI).
        #expect(inTenSeconds >= 150, "at least 75 % of it used: \(inTenSeconds)")
        #expect(byWorker.allSatisfy { $0 > 0 }, "both processes start actions: \(byWorker)")
    }

    /// Three processes run 1,500 plain parallel actions; one is SIGKILLed after 300 are stored.
    /// Every action is stored done; the live workers never run one twice (their claims hold);
    /// the only actions run twice are some the killed worker had started.
    @Test func threeProcessesRunPlainParallelActionsAtLeastOnceThroughASigkill() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open()
        let url = try PostgresTestServer.url()
        let workers = try (0..<3).map { _ in try CrashHelperRun(arguments: ["pg-parallel", url, store.schema]) }
        for worker in workers {
            #expect(await worker.line(after: 0) == "ready")
        }
        let count = 1_500
        let keys = Set((0..<count).map { "par-\($0)" })
        try await database.saveParallel((0..<count).map { CrashAction(key: "par-\($0)", queueName: "crash-par", index: $0) })
        let lines = EventCollector<String>()
        var stored: Set<String> = []
        var killed = false
        await withTaskGroup(of: Void.self) { group in
            for (index, worker) in workers.enumerated() {
                group.addTask {
                    var read = 1
                    while !Task.isCancelled {
                        let line = await worker.line(after: read)
                        read += 1
                        if line == "cancelled" || line == "EOF" { return }
                        lines.record("\(index) \(line)")
                    }
                }
            }
            var seen = 0
            while stored.count < count {
                let values = await lines.values(count: seen + 1)
                guard values.count > seen else { break }  // the time limit passed
                for line in values[seen...] {
                    let parts = line.split(separator: " ")
                    if parts.count == 3, parts[1] == "stored" { stored.insert(String(parts[2])) }
                }
                seen = values.count
                if !killed, stored.count >= 300 {
                    killed = true
                    await workers[0].kill()
                }
                // A success the killed worker stored as it died, before it could say so: in the
                // database, it is gone.
                if stored.count >= count - 16 {
                    for key in keys.subtracting(stored) {
                        let found: TaskLookup?
                        do { found = try await database.lookup(key: key, collection: "crash") } catch { continue }
                        if found == nil { stored.insert(key) }
                    }
                }
            }
            group.cancelAll()
        }
        for worker in workers.dropFirst() {
            await worker.finish()
        }
        var starts: [Int: [String]] = [:]
        for line in lines.values {
            let parts = line.split(separator: " ")
            guard parts.count == 3, parts[1] == "start", let worker = Int(parts[0]) else { continue }
            starts[worker, default: []].append(String(parts[2]))
        }
        let byKilled = Set(starts[0] ?? [])
        let byLive = (starts[1] ?? []) + (starts[2] ?? [])
        let twiceByLive = Dictionary(grouping: byLive, by: { $0 }).filter { $0.value.count > 1 }.keys
        let reRun = Set(byLive).intersection(byKilled)
        print("plain parallel actions on 3 processes, one SIGKILLed: \((starts[0] ?? []).count) + \((starts[1] ?? []).count) + \((starts[2] ?? []).count) runs; \(reRun.count) re-run after the kill")
        #expect(killed, "a worker was killed")
        #expect(stored == keys, "every action is stored done: \(keys.subtracting(stored).count) missing")
        #expect(try await database.snapshot().isEmpty, "nothing is left")
        #expect(twiceByLive.isEmpty, "a live worker's claim holds: none ran twice there: \(Array(twiceByLive.prefix(5)))")
        #expect(Set(byLive).union(byKilled) == keys, "every action started")
        #expect((starts[1]?.count ?? 0) > 0 && (starts[2]?.count ?? 0) > 0 && !byKilled.isEmpty, "all three ran some")
    }
}
#endif

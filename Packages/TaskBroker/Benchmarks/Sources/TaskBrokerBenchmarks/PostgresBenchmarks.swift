// The PostgreSQL section of `make bench PACKAGE=TaskBroker` (issue #12): TaskBrokerPostgres
// against raw postgres-nio loops, on the same server in the same run. Scripts/bench.sh passes the
// server's URL in QUEUEKIT_PG_URL. Every run uses fresh schemas (`bench_<random>_…`) and drops
// them at the end. `TaskBrokerBenchmarks pg` runs this section alone; QUEUEKIT_PG_ACTIONS
// overrides the burn-down's 100,000 actions (for quick runs while developing).
#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import PostgresNIO
import TaskBroker
import TaskBrokerPostgres

/// One row of the printed table.
struct PostgresBenchRow {
    var name: String
    var ours: String
    var peer: String
    var ratio: String
    var target: String
}

/// postgres-nio's logger for the peer loops: silent.
let benchLogger = Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })

/// The CPU time (user + system, in clock ticks) of each of the server's processes that
/// pg_stat_activity lists (backends, checkpointer, WAL writer …), by pid, with the process's
/// kind (`backend_type`), from /proc: the server must run on this machine.
func serverCPUTicks(_ admin: PostgresConnection) async throws -> [Int32: (kind: String, ticks: Int)] {
    var ticks: [Int32: (kind: String, ticks: Int)] = [:]
    let rows = try await admin.query("SELECT pid, coalesce(backend_type, '') FROM pg_stat_activity", logger: benchLogger)
    for try await (pid, kind) in rows.decode((Int32, String).self) {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { continue }
        // After "(comm) " come state (field 3) … utime and stime (fields 14 and 15).
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Int(fields[11]), let system = Int(fields[12]) else { continue }
        ticks[pid] = (kind, user + system)
    }
    return ticks
}

/// The server's CPU time between two samples of ``serverCPUTicks(_:)``, in milliseconds: in all,
/// and by kind of process.
func serverCPUMilliseconds(
    from before: [Int32: (kind: String, ticks: Int)], to after: [Int32: (kind: String, ticks: Int)]
) -> (total: Int, byKind: [String: Int]) {
    let perSecond = max(sysconf(Int32(_SC_CLK_TCK)), 1)
    var byKind: [String: Int] = [:]
    for (pid, sample) in after {
        byKind[sample.kind, default: 0] += (sample.ticks - (before[pid]?.ticks ?? 0)) * 1000 / perSecond
    }
    return (byKind.values.reduce(0, +), byKind)
}

/// A connection of the raw peer loops.
func rawConnection(_ configuration: TaskDatabase.PostgresConfiguration, id: Int) async throws -> PostgresConnection {
    let connection = PostgresConnection.Configuration(
        host: configuration.host, port: configuration.port, username: configuration.username,
        password: configuration.password, database: configuration.database, tls: .disable
    )
    return try await PostgresConnection.connect(configuration: connection, id: id, logger: benchLogger)
}

extension PostgresConnection {
    /// Runs a statement and returns how many rows it returned.
    @discardableResult
    func run(_ sql: PostgresQuery) async throws -> Int {
        try await query(sql, logger: benchLogger).collect().count
    }

    func count(_ sql: String) async throws -> Int {
        for try await value in try await query(PostgresQuery(unsafeSQL: sql), logger: benchLogger).decode(Int.self) {
            return value
        }
        return 0
    }
}

@MainActor
struct PostgresBenchmarks {
    let url: String
    let base: TaskDatabase.PostgresConfiguration
    let prefix = "bench_\(UInt32.random(in: 0...UInt32.max))"
    let admin: PostgresConnection
    var schemas: [String] = []
    var rows: [PostgresBenchRow] = []
    let actionCount: Int
    let queueCount = 1000

    init(url: String, actionCount: Int) async throws {
        self.url = url
        self.actionCount = actionCount
        base = try TaskDatabase.PostgresConfiguration(url: url)
        admin = try await rawConnection(base, id: 1)
    }

    mutating func newSchema(_ suffix: String) -> String {
        let name = "\(prefix)_\(suffix)"
        schemas.append(name)
        return name
    }

    func openDatabase(_ schema: String) async throws -> TaskDatabase {
        var configuration = base
        configuration.schema = schema
        return try await TaskDatabase.postgres(configuration: configuration)
    }

    static func run(url: String) async throws {
        let actionCount = Int(ProcessInfo.processInfo.environment["QUEUEKIT_PG_ACTIONS"] ?? "") ?? 100_000
        var bench = try await PostgresBenchmarks(url: url, actionCount: actionCount)
        let started = ContinuousClock.now
        print("PostgreSQL (\(bench.base.host):\(bench.base.port)/\(bench.base.database ?? ""), schemas \(bench.prefix)_*; fsync and synchronous_commit on)")
        do {
            // `TB_PG_ONLY=burn` runs the burn-down alone, `TB_PG_ONLY=latency` the
            // idle-to-start run alone (for profiling).
            switch ProcessInfo.processInfo.environment["TB_PG_ONLY"] {
            case "burn":
                // `TB_PG_PROCESSES=2,4` picks the process counts (1 by default here).
                let counts = (ProcessInfo.processInfo.environment["TB_PG_PROCESSES"] ?? "1")
                    .split(separator: ",").compactMap { Int($0) }
                try await bench.burnDowns(processCounts: counts.isEmpty ? [1] : counts)
                await bench.dropSchemas()
                bench.printTable()
                return
            case "parallel":
                try await bench.parallelBurnDowns()
                await bench.dropSchemas()
                bench.printTable()
                return
            case "latency":
                try await bench.latency()
                await bench.dropSchemas()
                bench.printTable()
                return
            default: break
            }
            try await bench.burnDowns()
            try await bench.parallelBurnDowns()
            try await bench.enqueue()
            try await bench.latency()
            try await bench.takeover()
        } catch {
            await bench.dropSchemas()
            throw error
        }
        await bench.dropSchemas()
        bench.printTable()
        print("PostgreSQL section: \(fmt(seconds(started.duration(to: .now)))) s wall time")
        try? await bench.admin.close()
    }

    func dropSchemas(_ names: [String]? = nil) async {
        for schema in names ?? schemas {
            _ = try? await admin.run(PostgresQuery(unsafeSQL: "DROP SCHEMA IF EXISTS \"\(schema)\" CASCADE"))
        }
    }

    func printTable() {
        let header = PostgresBenchRow(name: "PostgreSQL", ours: "TaskBroker", peer: "raw postgres-nio", ratio: "ratio", target: "target")
        let all = [header] + rows
        let nameWidth: Int = all.map(\.name.count).max() ?? 0
        let oursWidth: Int = all.map(\.ours.count).max() ?? 0
        let peerWidth: Int = all.map(\.peer.count).max() ?? 0
        let ratioWidth: Int = all.map(\.ratio.count).max() ?? 0
        let widths = [nameWidth, oursWidth, peerWidth, ratioWidth]
        func pad(_ text: String, _ width: Int) -> String { text.padding(toLength: width, withPad: " ", startingAt: 0) }
        print("")
        for row in all {
            print("| \(pad(row.name, widths[0])) | \(pad(row.ours, widths[1])) | \(pad(row.peer, widths[2])) | \(pad(row.ratio, widths[3])) | \(row.target)")
        }
    }

    // MARK: - 1. Burn-down

    /// How many raw-then-broker pairs the one-process burn-down runs (`TB_PG_ROUNDS`; 3 by default):
    /// this VM's speed moves by ±15 % from minute to minute, so the table reports the pair with
    /// the median ratio, and every pair is printed.
    static let oneProcessRounds = max(1, Int(ProcessInfo.processInfo.environment["TB_PG_ROUNDS"] ?? "") ?? 3)

    mutating func burnDowns(processCounts: [Int] = [1, 2, 4]) async throws {
        var rawSingle = Double.nan
        for processes in processCounts {
            var pairs: [(ours: Double, raw: Double)] = []
            for round in 1...(processes == 1 ? Self.oneProcessRounds : 1) {
                let created = schemas.count
                let raw = try await rawBurnDown(connections: processes, round: round)
                let (ours, stats) = try await burnDown(processes: processes, round: round)
                // Dropped at once, so that each pair starts on a database like the first pair's
                // (not on the emptied tables and dead rows of the pairs before).
                await dropSchemas(Array(schemas[created...]))
                schemas.removeSubrange(created...)
                print("burn-down, \(processes) worker process(es): \(fmt(ours)) actions/s; raw DELETE … SKIP LOCKED loop on \(processes) connection(s): \(fmt(raw)) rows/s; ratio \(fmt(ours / raw))")
                for line in stats { print("  \(line)") }
                pairs.append((ours, raw))
            }
            let median = pairs.sorted { $0.ours / $0.raw < $1.ours / $1.raw }[(pairs.count - 1) / 2]  // the lower of two middles
            if processes == 1 { rawSingle = median.raw }
            if pairs.count > 1 {
                print("  \(pairs.count) pairs, ratios \(pairs.map { fmt($0.ours / $0.raw) }.joined(separator: ", ")): the table shows the median pair")
            }
            rows.append(PostgresBenchRow(
                name: "burn-down \(actionCount / 1000)k/\(queueCount) queues, \(processes) proc",
                ours: "\(fmt(median.ours)) actions/s", peer: "\(fmt(median.raw)) rows/s (\(processes) conn)",
                ratio: "\(fmt(median.ours / median.raw))",
                target: processes == 1 ? ">= 0.50 x raw" + (pairs.count > 1 ? " (median of \(pairs.count) pairs)" : "") : "vs 1 conn: \(fmt(median.ours / rawSingle))"
            ))
        }
    }

    /// The raw peer: `connections` loops of DELETE … LIMIT 100 FOR UPDATE SKIP LOCKED, autocommit.
    mutating func rawBurnDown(connections: Int, round: Int = 1) async throws -> Double {
        let schema = newSchema("raw\(connections)_\(round)")
        let table = "\"\(schema)\".t"
        try await admin.run(PostgresQuery(unsafeSQL: "CREATE SCHEMA \"\(schema)\""))
        try await admin.run(PostgresQuery(unsafeSQL: "CREATE TABLE \(table) (id bigint PRIMARY KEY, queue_name text NOT NULL, payload bytea NOT NULL)"))
        try await admin.run(PostgresQuery(unsafeSQL: """
            INSERT INTO \(table) SELECT g, 'bench-q' || (g % \(queueCount)), decode(repeat('01', 60), 'hex')
            FROM generate_series(0, \(actionCount - 1)) g
            """))
        try await admin.run(PostgresQuery(unsafeSQL: "VACUUM ANALYZE \(table)"))
        // Both loops start right after a checkpoint: one that the setup's writes start during the
        // timed part costs it full-page writes and the checkpointer's CPU, at random.
        try await admin.run("CHECKPOINT")
        let base = self.base
        var links: [PostgresConnection] = []
        for index in 0..<connections { links.append(try await rawConnection(base, id: 10 + index)) }
        let delete = "DELETE FROM \(table) WHERE id IN (SELECT id FROM \(table) ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED) RETURNING id"
        let serverCPUBefore = try await serverCPUTicks(admin)
        let start = ContinuousClock.now
        let deleted = try await withThrowingTaskGroup(of: Int.self) { group in
            for link in links {
                group.addTask {
                    var total = 0
                    while true {
                        let count = try await link.run(PostgresQuery(unsafeSQL: delete))
                        if count == 0 { return total }
                        total += count
                    }
                }
            }
            var total = 0
            for try await count in group { total += count }
            return total
        }
        let elapsed = start.duration(to: .now)
        let (serverCPU, _) = serverCPUMilliseconds(from: serverCPUBefore, to: try await serverCPUTicks(admin))
        print("raw DELETE … SKIP LOCKED loop on \(connections) connection(s): \(fmt(seconds(elapsed) * 1000)) ms wall, server CPU \(fmt(Double(serverCPU) * 1000 / Double(max(actionCount, 1)))) µs per row")
        for link in links { try? await link.close() }
        guard deleted == actionCount else {
            throw TaskBrokerError(code: .storageFailed, message: "the raw loop deleted \(deleted) rows of \(actionCount)")
        }
        return Double(actionCount) / seconds(elapsed)
    }

    /// The broker: `processes` worker processes drain `actionCount` stored no-op actions.
    mutating func burnDown(processes: Int, round: Int = 1) async throws -> (Double, [String]) {
        let schema = newSchema("burn\(processes)_\(round)")
        let database = try await openDatabase(schema)
        var batch: [NoOpAction] = []
        for index in 0..<actionCount {
            batch.append(NoOpAction(key: "k\(index)", queueName: "bench-q\(index % queueCount)"))
            if batch.count == 10_000 || index == actionCount - 1 {
                try await database.save(batch)
                batch = []
            }
        }
        let table = "\"\(schema)\".action"
        let stored = try await admin.count("SELECT count(*) FROM \(table)")
        // Statistics for both tables, as autovacuum keeps them on a server that has been running.
        try await admin.run(PostgresQuery(unsafeSQL: "VACUUM ANALYZE \(table), \"\(schema)\".queue"))
        let inbox = LineInbox()
        var children: [BenchmarkChild] = []
        for _ in 0..<processes {
            // `TB_PG_LEASE_MS` shortens the workers' lease, so that leases are renewed while the
            // burn-down runs (renewals and finishes lock the same rows; the default lease outlasts the run).
            let lease = ProcessInfo.processInfo.environment["TB_PG_LEASE_MS"].map { [$0] } ?? []
            children.append(try BenchmarkChild.start(["pg-worker", "burn", url, schema] + lease, inbox: inbox))
        }
        defer { children.forEach { $0.kill() } }
        for _ in 0..<processes {
            guard await inbox.next(startingWith: "ready", timeout: .seconds(60)) != nil else {
                throw TaskBrokerError(code: .storageFailed, message: "a burn-down worker did not start")
            }
        }
        try await admin.run("CHECKPOINT")
        let serverCPUBefore = try await serverCPUTicks(admin)
        let start = ContinuousClock.now
        children.forEach { $0.send("go") }
        // Each worker prints its total of stored outcomes after every finish: the clock stops when
        // they add up to the stored actions. (Polling `count(*)` every 100 ms, as before, scanned the
        // action table on the server while it ran: ~5 % of the server's CPU, on the same 2 cores.)
        var totals: [String: Int] = [:]
        var elapsed = Duration.zero
        // When each tenth of the outcomes was stored: shows the start (every queue's actions read
        // and decoded) apart from the run that follows.
        var marks: [(stored: Int, at: Duration)] = []
        while true {
            guard let line = await inbox.next(startingWith: "applied", timeout: .seconds(60)) else {
                throw TaskBrokerError(code: .storageFailed, message: "the burn-down stalled: no finish for 60 s, \(totals.values.reduce(0, +)) of \(stored) stored")
            }
            let fields = line.split(separator: " ")
            guard fields.count == 3, let total = Int(fields[2]) else { continue }
            totals[String(fields[1])] = total
            let sum = totals.values.reduce(0, +)
            if sum * 10 >= (marks.count + 1) * stored {
                marks.append((sum, start.duration(to: .now)))
            }
            if sum >= stored {
                elapsed = start.duration(to: .now)
                break
            }
        }
        let left = try await admin.count("SELECT count(*) FROM \(table)")
        guard left == 0 else {
            throw TaskBrokerError(code: .storageFailed, message: "the workers stored \(stored) outcomes, but \(left) actions are left")
        }
        let (serverCPU, serverCPUByKind) = serverCPUMilliseconds(from: serverCPUBefore, to: try await serverCPUTicks(admin))
        children.forEach { $0.closeInput() }
        var stats: [String] = []
        for _ in 0..<processes {
            if let line = await inbox.next(startingWith: "stats", timeout: .seconds(40)) { stats.append(line) }
        }
        for child in children { child.process.waitUntilExit() }
        var counts: [String: Int] = [:]
        stats = stats.map { line -> String in
            let fields = line.split(separator: " ")
            let values = Dictionary(fields.dropFirst(2).compactMap { field -> (String, Int)? in
                let parts = field.split(separator: "=")
                guard parts.count == 2, let value = Int(parts[1]) else { return nil }
                return (String(parts[0]), value)
            }, uniquingKeysWith: { $1 })
            counts.merge(values, uniquingKeysWith: +)
            let claims = values["claims"] ?? 0, heads = values["heads"] ?? 0
            let finishes = values["finishes"] ?? 0, outcomes = values["outcomes"] ?? 0
            let reads = values["reads"] ?? 0
            let roundTrips = claims + reads + finishes
            let claimTime = values["claimms"] ?? 0, finishTime = values["finishms"] ?? 0, readTime = values["readms"] ?? 0
            // Each worker's own outcomes first: how the pool shared the work.
            return "worker \(fields.count > 1 ? fields[1] : "?"): \(outcomes) outcomes; \(claims) claims (\(fmt(Double(heads) / Double(max(claims, 1)))) heads each, "
                + "\(values["granted"] ?? 0) granted, \(values["refused"] ?? 0) held elsewhere, \(values["asks"] ?? 0) asks for queues; "
                + "\(claimTime) ms), \(finishes) finishes (\(fmt(Double(outcomes) / Double(max(finishes, 1)))) outcomes each, \(finishTime) ms), "
                + "\(reads) queue reads (\(readTime) ms; \(values["readqueues"] ?? 0) queues read first, \(values["heldqueues"] ?? 0) of them held elsewhere, \(values["readclaimed"] ?? 0) leases taken; \(values["aheads"] ?? 0) queues read ahead), \(values["letgo"] ?? 0) outcomes let their queue go, \(values["renewals"] ?? 0) renewals, "
                + "\(values["continued"] ?? 0) next heads claimed by finishes: \(claims + finishes) commits, "
                + "~\(roundTrips) round trips; process CPU \(values["cpums"] ?? 0) ms"
        }
        let handled = counts["handled"] ?? 0
        stats.append("ran \(handled) handler calls for \(stored) stored actions (\(handled - stored) more than stored); "
            + "finishes refused \(counts["fenced"] ?? 0) outcomes (lease lost) and found \(counts["outdated"] ?? 0) outdated")
        stats.append("\(stored) stored, timed from `go` to the workers' report that every outcome was stored: "
            + "\(fmt(seconds(elapsed) * 1000)) ms wall, server CPU \(serverCPU) ms ("
            + serverCPUByKind.filter { $0.value > 0 }.sorted { $0.value > $1.value }.map { "\($0.key) \($0.value) ms" }.joined(separator: ", ") + ")")
        // The start apart from the run: each worker reads and decodes every stored action of its
        // queues before they run, and a queue runs only once it is read.
        let milliseconds = { (duration: Duration) in fmt(seconds(duration) * 1000) }
        stats.append("stored by elapsed time: " + marks.map { "\($0.stored) by \(milliseconds($0.at)) ms" }.joined(separator: ", "))
        if marks.count == 10, seconds(marks[9].at - marks[2].at) > 0 {
            let rate = Double(marks[9].stored - marks[2].stored) / seconds(marks[9].at - marks[2].at)
            stats.append("after the first 30 %: \(Int(rate)) actions/s (the first 30 % took \(milliseconds(marks[2].at)) ms)")
        }
        // What limits it: commits and round trips per 1,000 actions (the raw loop: 10 and 10), and
        // where a worker's time goes (claim, finish and read calls, one cycle at a time).
        let perThousand = { (value: Int) in fmt(Double(value) * 1000 / Double(max(stored, 1))) }
        let commits = (counts["claims"] ?? 0) + (counts["finishes"] ?? 0)
        let roundTrips = (counts["claims"] ?? 0) + (counts["reads"] ?? 0) + (counts["finishes"] ?? 0)
        let wall = Double(processes) * seconds(elapsed) * 1000
        let share = { (key: String) in "\(fmt(Double(counts[key] ?? 0) * 100 / wall))%" }
        stats.append("limits: \(perThousand(commits)) commits and ~\(perThousand(roundTrips)) round trips per 1,000 actions (raw: 10 and 10); "
            + "of the workers' wall time, \(share("claimms")) in claims, \(share("finishms")) in finishes, \(share("readms")) in queue reads; "
            + "worker CPU \(fmt(Double(counts["cpums"] ?? 0) * 1000 / Double(max(stored, 1)))) µs and server CPU "
            + "\(fmt(Double(serverCPU) * 1000 / Double(max(stored, 1)))) µs per action")
        return (Double(stored) / seconds(elapsed), stats)
    }

    // MARK: - 1b. Burn-down of plain parallel actions

    /// Plain parallel actions against the same raw loop: raw-then-broker pairs, as the queues'
    /// burn-down (`TB_PG_ROUNDS`), the table showing the pair with the median ratio.
    mutating func parallelBurnDowns() async throws {
        var pairs: [(ours: Double, raw: Double)] = []
        for round in 1...Self.oneProcessRounds {
            let created = schemas.count
            let raw = try await rawBurnDown(connections: 1, round: round)
            let (ours, stats) = try await parallelBurnDown(round: round)
            await dropSchemas(Array(schemas[created...]))
            schemas.removeSubrange(created...)
            print("plain parallel burn-down, 1 worker process: \(fmt(ours)) actions/s; raw DELETE … SKIP LOCKED loop: \(fmt(raw)) rows/s; ratio \(fmt(ours / raw))")
            for line in stats { print("  \(line)") }
            pairs.append((ours, raw))
        }
        let median = pairs.sorted { $0.ours / $0.raw < $1.ours / $1.raw }[(pairs.count - 1) / 2]
        if pairs.count > 1 {
            print("  \(pairs.count) pairs, ratios \(pairs.map { fmt($0.ours / $0.raw) }.joined(separator: ", ")): the table shows the median pair")
        }
        rows.append(PostgresBenchRow(
            name: "plain parallel burn-down \(actionCount / 1000)k, 1 proc",
            ours: "\(fmt(median.ours)) actions/s", peer: "\(fmt(median.raw)) rows/s (1 conn)",
            ratio: "\(fmt(median.ours / median.raw))",
            target: ">= 0.70 x raw" + (pairs.count > 1 ? " (median of \(pairs.count) pairs)" : "")
        ))
    }

    /// One worker process drains `actionCount` stored plain parallel no-op actions.
    mutating func parallelBurnDown(round: Int) async throws -> (Double, [String]) {
        let schema = newSchema("par_\(round)")
        let database = try await openDatabase(schema)
        var batch: [NoOpAction] = []
        for index in 0..<actionCount {
            batch.append(NoOpAction(key: "k\(index)", queueName: "bench-parallel"))
            if batch.count == 10_000 || index == actionCount - 1 {
                try await database.saveParallel(batch)
                batch = []
            }
        }
        let table = "\"\(schema)\".parallel_action"
        let stored = try await admin.count("SELECT count(*) FROM \(table)")
        try await admin.run(PostgresQuery(unsafeSQL: "VACUUM ANALYZE \(table)"))
        let inbox = LineInbox()
        let child = try BenchmarkChild.start(["pg-worker", "parallel", url, schema], inbox: inbox)
        defer { child.kill() }
        guard await inbox.next(startingWith: "ready", timeout: .seconds(60)) != nil else {
            throw TaskBrokerError(code: .storageFailed, message: "the parallel burn-down worker did not start")
        }
        try await admin.run("CHECKPOINT")
        let serverCPUBefore = try await serverCPUTicks(admin)
        let start = ContinuousClock.now
        child.send("go")
        var elapsed = Duration.zero
        while true {
            guard let line = await inbox.next(startingWith: "applied", timeout: .seconds(60)) else {
                throw TaskBrokerError(code: .storageFailed, message: "the parallel burn-down stalled: no finish for 60 s")
            }
            let fields = line.split(separator: " ")
            guard fields.count == 3, let total = Int(fields[2]) else { continue }
            if total >= stored {
                elapsed = start.duration(to: .now)
                break
            }
        }
        let left = try await admin.count("SELECT count(*) FROM \(table)")
        guard left == 0 else {
            throw TaskBrokerError(code: .storageFailed, message: "the worker stored \(stored) outcomes, but \(left) actions are left")
        }
        let (serverCPU, _) = serverCPUMilliseconds(from: serverCPUBefore, to: try await serverCPUTicks(admin))
        child.closeInput()
        var stats: [String] = []
        if let line = await inbox.next(startingWith: "stats", timeout: .seconds(40)) {
            let values = Dictionary(line.split(separator: " ").dropFirst(2).compactMap { field -> (String, Int)? in
                let parts = field.split(separator: "=")
                guard parts.count == 2, let value = Int(parts[1]) else { return nil }
                return (String(parts[0]), value)
            }, uniquingKeysWith: { $1 })
            let claims = values["claims"] ?? 0, finishes = values["finishes"] ?? 0
            stats.append("\(claims) claims (\(fmt(Double(values["heads"] ?? 0) / Double(max(claims, 1)))) actions each, \(values["claimms"] ?? 0) ms), "
                + "\(finishes) finishes (\(fmt(Double(values["outcomes"] ?? 0) / Double(max(finishes, 1)))) outcomes each, \(values["finishms"] ?? 0) ms); "
                + "ran \(values["handled"] ?? 0) handler calls; worker CPU \(fmt(Double(values["cpums"] ?? 0) * 1000 / Double(max(stored, 1)))) µs "
                + "and server CPU \(fmt(Double(serverCPU) * 1000 / Double(max(stored, 1)))) µs per action; \(fmt(seconds(elapsed) * 1000)) ms wall")
        }
        child.process.waitUntilExit()
        return (Double(stored) / seconds(elapsed), stats)
    }

    // MARK: - 2. Enqueue

    mutating func enqueue() async throws {
        let database = try await openDatabase(newSchema("enqueue"))
        let singles = 2000
        let singleTime = try await ContinuousClock().measure {
            for index in 0..<singles {
                try await database.save(NoOpAction(key: "s\(index)", queueName: "bench-q\(index % 100)"))
            }
        }
        let batches = 20
        let batchTime = try await ContinuousClock().measure {
            for round in 0..<batches {
                try await database.save((0..<1000).map { NoOpAction(key: "b\(round)-\($0)", queueName: "bench-q\($0 % 100)") })
            }
        }
        // The peer: the same rows through raw INSERTs (autocommit; 1,000 per statement).
        let table = "\"\(newSchema("rawenqueue"))\".t"
        try await admin.run(PostgresQuery(unsafeSQL: "CREATE SCHEMA \"\(prefix)_rawenqueue\""))
        try await admin.run(PostgresQuery(unsafeSQL: "CREATE TABLE \(table) (id bigint PRIMARY KEY, queue_name text NOT NULL, payload bytea NOT NULL)"))
        let payload = Data(repeating: 1, count: 60)
        let rawSingleTime = try await ContinuousClock().measure {
            for index in 0..<singles {
                let id = Int64(index), queue = "bench-q\(index % 100)"
                try await admin.run("INSERT INTO \(unescaped: table) VALUES (\(id), \(queue), \(payload))")
            }
        }
        let rawBatchTime = try await ContinuousClock().measure {
            for round in 0..<batches {
                let ids = (0..<1000).map { Int64(singles + round * 1000 + $0) }
                let queues = (0..<1000).map { "bench-q\($0 % 100)" }
                try await admin.run("INSERT INTO \(unescaped: table) SELECT unnest(\(ids)::int8[]), unnest(\(queues)::text[]), \(payload)")
            }
        }
        let single = Double(singles) / seconds(singleTime), rawSingle = Double(singles) / seconds(rawSingleTime)
        let batch = Double(batches * 1000) / seconds(batchTime), rawBatch = Double(batches * 1000) / seconds(rawBatchTime)
        print("enqueue one per transaction: \(fmt(single)) actions/s (\(singles) saves); raw INSERT: \(fmt(rawSingle)) rows/s")
        print("enqueue 1,000 per transaction: \(fmt(batch)) actions/s (\(batches) saves); raw INSERT … unnest: \(fmt(rawBatch)) rows/s")
        rows.append(PostgresBenchRow(
            name: "enqueue, 1 per transaction", ours: "\(fmt(single)) actions/s", peer: "\(fmt(rawSingle)) rows/s",
            ratio: fmt(single / rawSingle), target: "none set"
        ))
        rows.append(PostgresBenchRow(
            name: "enqueue, 1,000 per transaction", ours: "\(fmt(batch)) actions/s", peer: "\(fmt(rawBatch)) rows/s",
            ratio: fmt(batch / rawBatch), target: "none set"
        ))
    }

    // MARK: - 3. Idle-to-start latency

    /// From the start of the save call in this process to the handler's start in a worker
    /// process (CLOCK_MONOTONIC, shared by the processes), the worker idle in between.
    mutating func latency() async throws {
        let schema = newSchema("latency")
        let database = try await openDatabase(schema)
        let inbox = LineInbox()
        let child = try BenchmarkChild.start(["pg-worker", "latency", url, schema], inbox: inbox)
        defer { child.kill() }
        guard await inbox.next(startingWith: "ready", timeout: .seconds(60)) != nil else {
            throw TaskBrokerError(code: .storageFailed, message: "the latency worker did not start")
        }
        let rounds = 300
        var latencies: [Double] = []
        var saves: [Double] = []
        var wakeUps: [Double] = []
        for index in 0..<rounds {
            let key = "l\(index)"
            let before = monotonicNanoseconds()
            try await database.save(NoOpAction(key: key, queueName: "bench-q\(index % 10)"))
            let saved = monotonicNanoseconds()
            saves.append(Double(saved - before) / 1e6)
            guard let line = await inbox.next(startingWith: "started \(key) ", timeout: .seconds(10)),
                  let started = line.split(separator: " ").last.flatMap({ Int64($0) }) else {
                throw TaskBrokerError(code: .storageFailed, message: "action \(key) did not start within 10 s")
            }
            latencies.append(Double(started - before) / 1e6)
            wakeUps.append(Double(started - saved) / 1e6)
        }
        child.closeInput()
        _ = await inbox.next(startingWith: "eof", timeout: .seconds(10))
        child.process.waitUntilExit()
        latencies.sort()
        saves.sort()
        wakeUps.sort()
        let p50 = percentile(latencies, 0.5), p99 = percentile(latencies, 0.99)
        print("idle-to-start (save in this process, broker in a worker process): p50 \(String(format: "%.2f", p50)) ms, p99 \(String(format: "%.2f", p99)) ms, max \(String(format: "%.2f", latencies.last ?? .nan)) ms over \(rounds); the save call alone p50 \(String(format: "%.2f", percentile(saves, 0.5))) ms, p99 \(String(format: "%.2f", percentile(saves, 0.99))) ms; from its return to the start p50 \(String(format: "%.2f", percentile(wakeUps, 0.5))) ms, p99 \(String(format: "%.2f", percentile(wakeUps, 0.99))) ms")
        // The issue's target: a saved (committed) action starts in < 5 ms at p50 on loopback.
        let fromCommit = percentile(wakeUps, 0.5)
        rows.append(PostgresBenchRow(
            name: "idle→start from the save's commit, other process (\(rounds))",
            ours: "p50 \(String(format: "%.2f", fromCommit)) ms, p99 \(String(format: "%.2f", percentile(wakeUps, 0.99))) ms",
            peer: "-", ratio: "-", target: "p50 < 5 ms: \(fromCommit < 5 ? "met" : "missed")"
        ))
        rows.append(PostgresBenchRow(
            name: "idle→start counting the save call (\(rounds))",
            ours: "p50 \(String(format: "%.2f", p50)) ms, p99 \(String(format: "%.2f", p99)) ms",
            peer: "save call p50 \(String(format: "%.2f", percentile(saves, 0.5))) ms", ratio: "-", target: "none set"
        ))
    }

    // MARK: - 4. Takeover after SIGKILL

    /// Two workers with a 2 s lease; the one that starts the long action is killed; how long until
    /// the other starts it.
    mutating func takeover() async throws {
        let lease = Duration.seconds(2)
        let bound = seconds(lease) * 4 / 3
        var takeovers: [Double] = []
        var attempts: [String] = []
        // Killed at different points of the renewal cycle (renewals every 667 ms).
        let holds: [Duration] = [.milliseconds(300), .milliseconds(1000), .milliseconds(2500)]
        for (round, hold) in zip(1...3, holds) {
            let schema = newSchema("takeover\(round)")
            let database = try await openDatabase(schema)
            let inbox = LineInbox()
            let children = try (0..<2).map { _ in
                try BenchmarkChild.start(["pg-worker", "takeover", url, schema, "2000"], inbox: inbox)
            }
            defer { children.forEach { $0.kill() } }
            for _ in 0..<2 {
                guard await inbox.next(startingWith: "ready", timeout: .seconds(60)) != nil else {
                    throw TaskBrokerError(code: .storageFailed, message: "a takeover worker did not start")
                }
            }
            try await database.save(NoOpAction(key: "t\(round)", queueName: "bench-t"))
            guard let first = await inbox.next(startingWith: "started t\(round) ", timeout: .seconds(10)) else {
                throw TaskBrokerError(code: .storageFailed, message: "the long action did not start")
            }
            let firstFields = first.split(separator: " ")
            let holder = firstFields.count == 5 ? Int32(firstFields[3]) ?? -1 : -1
            guard let victim = children.first(where: { $0.pid == holder }) else {
                throw TaskBrokerError(code: .storageFailed, message: "unknown holder in \(first)")
            }
            try await Task.sleep(for: hold)
            victim.kill()
            let killed = monotonicNanoseconds()
            guard let second = await inbox.next(startingWith: "started t\(round) ", timeout: .seconds(30)) else {
                throw TaskBrokerError(code: .storageFailed, message: "no worker took the action over within 30 s")
            }
            let fields = second.split(separator: " ")
            guard fields.count == 5, let started = Int64(fields[4]) else {
                throw TaskBrokerError(code: .storageFailed, message: "unreadable line \(second)")
            }
            takeovers.append(Double(started - killed) / 1e9)
            attempts.append("round \(round): killed pid \(holder) \(hold) after it started; pid \(fields[3]) started it after \(String(format: "%.2f", takeovers.last ?? 0)) s as attempt \(fields[2])")
            children.forEach { $0.kill() }
            for child in children { child.process.waitUntilExit() }
        }
        let worst = takeovers.max() ?? .nan
        print("takeover after SIGKILL (lease 2 s): \(takeovers.map { String(format: "%.2f s", $0) }.joined(separator: ", ")); max \(String(format: "%.2f", worst)) s; bound lease + lease/3 = \(String(format: "%.2f", bound)) s")
        for line in attempts { print("  \(line)") }
        rows.append(PostgresBenchRow(
            name: "takeover after SIGKILL, lease 2 s",
            ours: "max \(String(format: "%.2f", worst)) s (\(takeovers.map { String(format: "%.2f", $0) }.joined(separator: ", ")))",
            peer: "-", ratio: "-", target: "<= \(String(format: "%.2f", bound)) s"
        ))
    }
}

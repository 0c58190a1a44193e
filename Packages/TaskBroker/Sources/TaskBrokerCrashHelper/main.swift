// Another process for the tests.
//
//   TaskBrokerCrashHelper <database path> <log path>
//     The crash test's worker: runs the broker "crash" on the database and logs every action to the
//     log file, with fsync, before it reports progress on stdout. The test kills it with SIGKILL at
//     random moments. stdout: "ready", "done <key>" after each handled action, "drained" when
//     nothing is left.
//
//   TaskBrokerCrashHelper serve <database path>
//     Runs the broker "crash" until its stdin closes, whatever is saved meanwhile (by other
//     processes too). stdout: "ready", then "done <key>" after each handled action.
//
//   TaskBrokerCrashHelper pg-worker <postgres url> <schema> <log path> [<broker name>]
//     A worker of the PostgreSQL crash test: runs the broker "crash" (or the name given; lease 2 s,
//     16 queues at once; the change feed's heartbeat QUEUEKIT_HELPER_HEARTBEAT_MS if set) until its stdin
//     closes. Its handler appends "S <key> <pid> <monotonic ns>" when an action starts and "E …" when
//     it returns (plain writes: they survive SIGKILL), taking 2–10 ms in between; its storage
//     stamps claims ("C", then "G" or "N": see ClaimStampingStorage). stdout: "ready", then each
//     "S …" and "E …" line once it is in the log.
//
//   TaskBrokerCrashHelper pg-serve <postgres url> <schema>
//     Runs the broker "crash" on PostgreSQL until its stdin closes. stdout: "ready", then
//     "done <key>" after each handled action.
//
//   TaskBrokerCrashHelper pg-save-if-absent <postgres url> <schema> <count>
//     Says "ready", waits for a line on stdin, then saves the actions unique-0 … unique-<count - 1>
//     (queues crash-unique-0 … crash-unique-4) with saveIfAbsent, and says "stored <n>": how many
//     of them this process stored.
//
//   TaskBrokerCrashHelper pg-schedule <postgres url> <schema> <seconds>
//     Says "ready", waits for a line on stdin, then runs a TaskScheduler with the schedule
//     "every-second" (every 1 s; actions tick.key in queue crash-ticks) for <seconds> seconds. stdout:
//     "enqueued <key>", "elsewhere <key>", "kept <key>" or "failed <key> <message>" per tick, then "done"
//     once a graceful shutdown has let the tick being recorded finish.
//
//   TaskBrokerCrashHelper pg-rate <postgres url> <schema>
//     Runs the broker "crash" on PostgreSQL with a rate limit of 20 starts a second shared by the
//     queues crash-rate-…, until its stdin closes. stdout: "ready", then "start <key> <ms>" as
//     each action starts (milliseconds since 1970, this machine's clock).
//
//   TaskBrokerCrashHelper pg-parallel <postgres url> <schema>
//     Runs the broker "crash" on PostgreSQL (lease 2 s, 8 plain parallel actions at once) until its
//     stdin closes. stdout: "ready", then "start <key>" and "done <key>" around each run (2–10 ms),
//     and "stored <key>" once its success is stored.
//
//   TaskBrokerCrashHelper forward <upstream port> <pattern>
//     A TCP forwarder on 127.0.0.1 to the upstream port that freezes (see FreezingForwarder) once
//     a client sends <pattern>. stdout: "listening <port>", then "frozen". Exits when stdin closes.
//
//   TaskBrokerCrashHelper trace-save <database path> <queue> <key> [parallel]
//     With an in-memory tracer (swift-distributed-tracing's InMemoryTracer), saves one action inside
//     a span "request" (a plain parallel action with `parallel`). stdout: "request <trace id>
//     <span id>" and "save <trace id> <span id> <parent span id>" (the save's own span).
//
//   TaskBrokerCrashHelper trace-serve <database path>
//     With an in-memory tracer, runs the broker "trace" until it has run one action, then shuts it
//     down. stdout: "handle <trace id> <parent span id> <kind>" (the run's span),
//     "claim <linked trace id>…" (the traces the claims' spans link to) and "outcome <linked trace
//     id>…" (the traces the span that stored its outcome links to).
//
//   TaskBrokerCrashHelper lock <database path>
//     Holds SQLite's write lock (BEGIN EXCLUSIVE) until a line arrives on stdin. stdout: "locked",
//     then "released".
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import GRDB
import InMemoryTracing
import Instrumentation
import Logging
import ServiceLifecycle
import Synchronization
import TaskBroker
#if canImport(TaskBrokerPostgres)
import TaskBrokerPostgres
#endif
import Tracing

let arguments = CommandLine.arguments
// The PostgreSQL modes: in a build with TaskBrokerPostgres (not the AddressSanitizer run's).
#if canImport(TaskBrokerPostgres)
if arguments.count == 5 || arguments.count == 6, arguments[1] == "pg-worker" {
    await serveUntilStdinCloses {
        var configuration = try TaskDatabase.PostgresConfiguration(url: arguments[2])
        configuration.schema = arguments[3]
        configuration.leaseDuration = .seconds(2)
        configuration.poolSize = 4
        if let milliseconds = ProcessInfo.processInfo.environment["QUEUEKIT_HELPER_HEARTBEAT_MS"].flatMap(Int64.init) {
            configuration.heartbeatInterval = .milliseconds(milliseconds)
        }
        let log = StampLog(path: arguments[4])
        let database = TaskDatabase(storage: ClaimStampingStorage(base: try await TaskDatabase.postgres(configuration: configuration).storage, log: log))
        return try await TaskQueueBroker.setup(
            database: database, name: arguments.count == 6 ? arguments[5] : "crash", handler: StampingHandler(log: log),
            configuration: .init(maxConcurrentQueues: 16)
        )
    }
}
if arguments.count == 4, arguments[1] == "pg-serve" {
    await serveUntilStdinCloses {
        var configuration = try TaskDatabase.PostgresConfiguration(url: arguments[2])
        configuration.schema = arguments[3]
        return try await TaskQueueBroker.setup(
            database: try await TaskDatabase.postgres(configuration: configuration), name: "crash", handler: ServeHandler()
        )
    }
}
if arguments.count == 4, arguments[1] == "pg-rate" {
    await serveUntilStdinCloses {
        var configuration = try TaskDatabase.PostgresConfiguration(url: arguments[2])
        configuration.schema = arguments[3]
        var brokerConfiguration = TaskQueueBroker.Configuration()
        brokerConfiguration.rateLimits = [try TaskRateLimit(prefix: "crash-rate-", starts: 20, per: .seconds(1))]
        return try await TaskQueueBroker.setup(
            database: try await TaskDatabase.postgres(configuration: configuration), name: "crash", handler: StartReportingHandler(),
            configuration: brokerConfiguration
        )
    }
}
if arguments.count == 4, arguments[1] == "pg-parallel" {
    await serveUntilStdinCloses {
        var configuration = try TaskDatabase.PostgresConfiguration(url: arguments[2])
        configuration.schema = arguments[3]
        configuration.leaseDuration = .seconds(2)
        var brokerConfiguration = TaskQueueBroker.Configuration(startsAutomatically: false)
        brokerConfiguration.maxConcurrentParallelActions = 8
        let broker = try await TaskQueueBroker.setup(
            database: try await TaskDatabase.postgres(configuration: configuration), name: "crash", handler: RunReportingHandler(),
            configuration: brokerConfiguration
        )
        let events = broker.events
        Task {
            for await case .succeeded(_, let key, _) in events {
                say("stored \(key)")
            }
        }
        broker.start()
        return broker
    }
}
if arguments.count == 5, arguments[1] == "pg-save-if-absent", let count = Int(arguments[4]) {
    do {
        var configuration = try TaskDatabase.PostgresConfiguration(url: arguments[2])
        configuration.schema = arguments[3]
        let database = try await TaskDatabase.postgres(configuration: configuration)
        say("ready")
        await stdinLine()
        var stored = 0
        for action in uniqueActions(count: count) where try await database.saveIfAbsent(action) {
            stored += 1
        }
        say("stored \(stored)")
        exit(0)
    } catch {
        say("error \(error)")
        exit(1)
    }
}
if arguments.count == 5, arguments[1] == "pg-schedule", let seconds = Int(arguments[4]) {
    do {
        var configuration = try TaskDatabase.PostgresConfiguration(url: arguments[2])
        configuration.schema = arguments[3]
        let database = try await TaskDatabase.postgres(configuration: configuration)
        let schedule = try TaskSchedule("every-second", .every(.seconds(1))) { tick in
            CrashAction(key: tick.key, collection: "crash", queueName: "crash-ticks", index: 0)
        }
        let scheduler = try TaskScheduler(database: database, schedules: [schedule])
        let events = scheduler.events
        say("ready")
        await stdinLine()
        // Stopped by a graceful shutdown, as a service is: a tick being recorded then finishes
        // and says so, so every tick this process stored is on its stdout.
        let services = ServiceGroup(
            configuration: .init(services: [scheduler], gracefulShutdownSignals: [], logger: Logger(label: "crash-helper"))
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await services.run() }
            group.addTask {
                for await event in events {
                    switch event {
                    case .enqueued(let tick, _): say("enqueued \(tick.key)")
                    case .recordedElsewhere(let tick): say("elsewhere \(tick.key)")
                    case .keyStillStored(let tick, _): say("kept \(tick.key)")
                    case .failed(let tick, let message, _): say("failed \(tick.key) \(message)")
                    case .storageFailed(let message, _): say("failed start \(message)")
                    }
                }
            }
            try await Task.sleep(for: .seconds(seconds))
            await services.triggerGracefulShutdown()
            try await group.waitForAll()
        }
        say("done")
        exit(0)
    } catch {
        say("error \(error)")
        exit(1)
    }
}
#endif
if arguments.count == 5 || (arguments.count == 6 && arguments[5] == "parallel"), arguments[1] == "trace-save" {
    let tracer = uniqueTracer()
    InstrumentationSystem.bootstrap(tracer)
    do {
        let database = try await TaskDatabase.sqlite(path: arguments[2])
        let action = CrashAction(key: arguments[4], collection: "crash", queueName: arguments[3], index: 0)
        try await withSpan("request") { _ in
            if arguments.count == 6 {
                try await database.saveParallel(action)
            } else {
                try await database.save(action)
            }
        }
        for span in tracer.finishedSpans {
            switch span.operationName {
            case "request": say("request \(span.traceID) \(span.spanID)")
            case "TaskBroker save": say("save \(span.traceID) \(span.spanID) \(span.parentSpanID ?? "-")")
            default: break
            }
        }
        exit(0)
    } catch {
        say("error \(error)")
        exit(1)
    }
}
if arguments.count == 3, arguments[1] == "trace-serve" {
    let tracer = uniqueTracer()
    InstrumentationSystem.bootstrap(tracer)
    do {
        let database = try await TaskDatabase.sqlite(path: arguments[2])
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "trace", handler: ServeHandler(), configuration: .init(startsAutomatically: false)
        )
        let events = broker.events
        broker.start()
        for await event in events {
            if case .succeeded = event { break }
        }
        // Every span has ended once the broker has stored what it ran.
        await broker.shutdown()
        for span in tracer.finishedSpans {
            switch span.operationName {
            case "TaskBroker handle": say("handle \(span.traceID) \(span.parentSpanID ?? "-") \(span.kind)")
            case "TaskBroker claim":
                let linked = span.links.compactMap { $0.context.inMemorySpanContext?.traceID }
                if !linked.isEmpty { say("claim \(linked.joined(separator: " "))") }
            case "TaskBroker store outcomes":
                let linked = span.links.compactMap { $0.context.inMemorySpanContext?.traceID }
                say("outcome \(linked.joined(separator: " "))")
            default: break
            }
        }
        exit(0)
    } catch {
        say("error \(error)")
        exit(1)
    }
}
if arguments.count == 3, arguments[1] == "serve" {
    await serveUntilStdinCloses {
        try await TaskQueueBroker.setup(database: try await TaskDatabase.sqlite(path: arguments[2]), name: "crash", handler: ServeHandler())
    }
}
if arguments.count == 4, arguments[1] == "forward", let upstream = UInt16(arguments[2]) {
    guard let (listener, port) = FreezingForwarder.listen() else {
        say("error could not listen on 127.0.0.1")
        exit(1)
    }
    say("listening \(port)")
    Thread.detachNewThread {
        FreezingForwarder(upstreamPort: upstream, pattern: Array(arguments[3].utf8)).run(listening: listener) { say("frozen") }
    }
    await stdinLine()
    exit(0)
}
if arguments.count == 3, arguments[1] == "lock" {
    do {
        let queue = try DatabaseQueue(path: arguments[2])
        // The transaction stays open for the whole access: this process does nothing else meanwhile.
        try queue.inDatabase { db in
            try db.execute(sql: "BEGIN EXCLUSIVE")
            say("locked")
            _ = readLine()
            try db.execute(sql: "COMMIT")
        }
        say("released")
        exit(0)
    } catch {
        say("error \(error)")
        exit(1)
    }
}
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

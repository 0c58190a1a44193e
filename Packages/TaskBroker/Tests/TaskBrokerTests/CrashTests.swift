import Foundation
import TaskBroker
import Testing

/// A worker process killed with SIGKILL at random moments loses nothing, keeps each queue's
/// order, and runs an action again only if it was in flight at the kill.
@Suite(.timeLimit(.minutes(3)))
struct CrashTests {
    @Test func killedWorkerLosesNothingAndKeepsOrder() async throws {
        let directory = try TemporaryDirectory()
        let databasePath = directory.path("tasks.sqlite")
        let logPath = directory.path("log.txt")
        let queues = 6
        // 200 actions per queue, and 100 more each time the helper drains them before 40 kills
        // landed: a loaded machine lets the helper run far ahead of this test's reading of its
        // output (1,200 actions once gave only 18 kills).
        var perQueue = 0
        func enqueue(_ count: Int) async throws {
            let database = try await TaskDatabase.sqlite(path: databasePath)
            var actions: [CrashAction] = []
            for index in perQueue..<(perQueue + count) {
                for queue in 0..<queues {
                    actions.append(CrashAction(key: "q\(queue)-\(index)", queueName: "crash-q\(queue)", index: index))
                }
            }
            try await database.save(actions)
            perQueue += count
        }
        try await enqueue(200)
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        defer { try? log.close() }

        let seed = UInt64.random(in: 1...UInt64.max)
        var random = SplitMix64(state: seed)
        var kills = 0
        var drained = false
        for _ in 0..<400 where !drained {
            try log.seekToEnd()
            try log.write(contentsOf: Data("run\n".utf8))
            try log.synchronize()
            let run = try CrashHelperRun(database: databasePath, log: logPath)
            // Kill after a random number of progress lines; the last runs go to the end.
            let killAfter = kills < 40 ? Int.random(in: 0...8, using: &random) : Int.max
            var seen = 0
            var done = 0
            while true {
                let line = await run.line(after: seen)
                seen += 1
                if line == "drained" {
                    drained = true
                    break
                }
                try #require(line != "EOF" && !line.hasPrefix("error"), "helper stopped unexpectedly: \(line) (seed \(seed))")
                if line.hasPrefix("done ") { done += 1 }
                if line == "ready" && killAfter == 0 || done >= killAfter && killAfter > 0 {
                    await run.kill()
                    kills += 1
                    break
                }
            }
            if drained {
                await run.waitForExit()
                if kills < 40 {
                    try await enqueue(100)
                    drained = false
                }
            }
        }
        #expect(drained, "seed \(seed)")
        #expect(kills >= 40)
        let database = try await TaskDatabase.sqlite(path: databasePath)
        #expect(try await database.snapshot().isEmpty, "nothing is left behind")

        // Check the log: split into runs, then per queue.
        let text = try String(contentsOfFile: logPath, encoding: .utf8)
        var runs: [[(kind: String, key: String)]] = []
        for line in text.split(separator: "\n") {
            if line == "run" {
                runs.append([])
                continue
            }
            let parts = line.split(separator: " ")
            runs[runs.count - 1].append((String(parts[0]), String(parts[1])))
        }
        func queueOf(_ key: String) -> String { String(key.split(separator: "-")[0]) }
        func indexOf(_ key: String) -> Int { Int(key.split(separator: "-")[1]) ?? -1 }

        var startsPerQueue: [String: [Int]] = [:]
        var doneKeys: Set<String> = []
        var lastRunOfKey: [String: Int] = [:]
        for (runIndex, run) in runs.enumerated() {
            var lastStartedInRun: [String: String] = [:]
            var startedInRun: Set<String> = []
            var openInQueue: [String: String] = [:]
            for entry in run {
                let queue = queueOf(entry.key)
                if entry.kind == "start" {
                    #expect(!startedInRun.contains(entry.key), "\(entry.key) started twice in one run (seed \(seed))")
                    #expect(openInQueue[queue] == nil, "two actions of \(queue) in flight at once (seed \(seed))")
                    if let previous = lastRunOfKey[entry.key] {
                        // A re-run: the previous run must have been killed with this action in flight,
                        // that is, it was the last action of its queue that run started.
                        let previousRun = runs[previous]
                        let lastOfQueue = previousRun.last { $0.kind == "start" && queueOf($0.key) == queue }?.key
                        #expect(lastOfQueue == entry.key, "\(entry.key) ran again although it was not in flight at the kill (seed \(seed))")
                    }
                    startedInRun.insert(entry.key)
                    lastRunOfKey[entry.key] = runIndex
                    lastStartedInRun[queue] = entry.key
                    openInQueue[queue] = entry.key
                    startsPerQueue[queue, default: []].append(indexOf(entry.key))
                } else {
                    #expect(openInQueue[queue] == entry.key, "done \(entry.key) without its start (seed \(seed))")
                    openInQueue[queue] = nil
                    doneKeys.insert(entry.key)
                }
            }
        }
        for queue in 0..<queues {
            var order: [Int] = []
            for index in startsPerQueue["q\(queue)"] ?? [] where order.last != index {
                order.append(index)
            }
            #expect(order == Array(0..<perQueue), "q\(queue) ran out of order or lost actions: \(order) (seed \(seed))")
        }
        #expect(doneKeys.count == queues * perQueue)
    }
}

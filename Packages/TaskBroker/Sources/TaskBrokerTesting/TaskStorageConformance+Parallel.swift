import Foundation
import TaskBrokerCore

extension TaskStorageConformance {
    /// The checks of a backend that stores plain parallel actions (`ParallelTaskStorage`): run
    /// each against a fresh, empty backend, as ``checks``. A claim's lease is the one the backend
    /// grants (a shared backend's own, else the one asked for); the check of expiry waits for it.
    public static let parallelChecks: [Check] = [
        Check("a plain parallel action's trace context is stored with it and its claim returns it") { storage in
            let parallel = try parallelStorage(storage)
            let headers = ["traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"]
            _ = try await parallel.saveParallel([NewTask(key: "t", collection: "c", queueName: "p", payload: Data(), traceContext: headers)])
            let claims = try await parallel.claimParallel(.prefix("p"), limit: 1, owner: "w", leaseDuration: .seconds(30), now: Date())
            try expect(claims.map(\.task.traceContext) == [headers], "the claim returns it: \(claims.map(\.task.traceContext))")
            try expect(try await parallel.lookupParallel(key: "t", collection: "c")?.task.traceContext == headers, "a lookup returns it")
        },
        Check("plain parallel actions are kept apart from the queues and claimed by priority, then position") { storage in
            let parallel = try parallelStorage(storage)
            let saved = try await parallel.saveParallel([
                NewTask(key: "a", collection: "c", queueName: "p-1", payload: Data("a".utf8)),
                NewTask(key: "b", collection: "c", queueName: "p-2", payload: Data("b".utf8), priority: 5),
                NewTask(key: "c", collection: "c", queueName: "p-1", payload: Data("c".utf8)),
                NewTask(key: "d", collection: "c", queueName: "other", payload: Data("d".utf8), priority: 9),
            ])
            try expect(saved.map(\.key) == ["a", "b", "c", "d"] && Set(saved.map(\.revision)).count == 4, "each is stored with its own revision: \(saved)")
            try expect(saved[0].position < saved[2].position, "positions follow the saves: \(saved)")
            try expect(try await storage.tasks(inQueue: "p-1").isEmpty, "no queue read returns them")
            try expect(try await storage.queueNames().isEmpty, "they make no queue of ordered actions")
            let first = try await parallel.claimParallel(.prefix("p-"), limit: 2, owner: "w1", leaseDuration: .seconds(30), now: Date())
            try expect(first.map(\.task.key) == ["b", "a"], "the larger priority first, then the first saved: \(first.map(\.task.key))")
            try expect(first[1].task.payload == Data("a".utf8) && first[1].task.attempts == 0, "a claim returns the action as stored: \(first[1])")
            let rest = try await parallel.claimParallel(.prefix("p-"), limit: 10, owner: "w1", leaseDuration: .seconds(30), now: Date())
            try expect(rest.map(\.task.key) == ["c"], "the prefix's other action, not another prefix's: \(rest.map(\.task.key))")
            let none = try await parallel.claimParallel(.prefix("p-"), limit: 10, owner: "w2", leaseDuration: .seconds(30), now: Date())
            try expect(none.isEmpty, "claimed actions are not claimed again: \(none.map(\.task.key))")
            let listed = try await parallel.claimParallel(.queues(["other"]), limit: 10, owner: "w2", leaseDuration: .seconds(30), now: Date())
            try expect(listed.map(\.task.key) == ["d"], "a list of queues takes those: \(listed.map(\.task.key))")
            try expect(try await parallel.parallelQueueNames() == ["other", "p-1", "p-2"], "their queues are listed")
            let counts = try await parallel.parallelCounts()
            try expect(counts["p-1"]?.pending == 2 && counts["p-2"]?.pending == 1 && counts["p-1"]?.oldestSavedAt != nil, "counted per queue: \(counts)")
        },
        Check("owners claiming at once each get different actions") { storage in
            let parallel = try parallelStorage(storage)
            _ = try await parallel.saveParallel((0..<60).map { NewTask(key: "k\($0)", collection: "c", queueName: "p", payload: Data()) })
            async let one = parallel.claimParallel(.prefix("p"), limit: 25, owner: "w1", leaseDuration: .seconds(30), now: Date())
            async let two = parallel.claimParallel(.prefix("p"), limit: 25, owner: "w2", leaseDuration: .seconds(30), now: Date())
            let (first, second) = try await (one, two)
            let keys = first.map(\.task.key) + second.map(\.task.key)
            try expect(first.count == 25 && second.count == 25, "each gets what it asked for: \(first.count), \(second.count)")
            try expect(Set(keys).count == 50, "no action is claimed twice: \(keys.count) claims of \(Set(keys).count) actions")
            let rest = try await parallel.claimParallel(.prefix("p"), limit: 25, owner: "w3", leaseDuration: .seconds(30), now: Date())
            try expect(rest.count == 10 && Set(rest.map(\.task.key)).isDisjoint(with: keys), "the rest go to a third: \(rest.count)")
        },
        Check("an outcome is stored only under its claim: owner, token and revision") { storage in
            let parallel = try parallelStorage(storage)
            _ = try await parallel.saveParallel([task("a", "p"), task("b", "p")])
            let claims = try await parallel.claimParallel(.prefix("p"), limit: 2, owner: "w1", leaseDuration: .seconds(30), now: Date())
            try expect(claims.count == 2, "both are claimed: \(claims)")
            let refusedOwner = try await parallel.finishParallel([TaskParallelOutcome(claim: claims[0], result: .completed)], owner: "w2")
            try expect(refusedOwner.map(\.task.key) == ["a"], "another owner's outcome is refused: \(refusedOwner)")
            var stale = claims[0]
            stale.token -= 1
            let refusedToken = try await parallel.finishParallel([TaskParallelOutcome(claim: stale, result: .completed)], owner: "w1")
            try expect(refusedToken.count == 1, "an older claim's outcome is refused: \(refusedToken)")
            _ = try await parallel.saveParallel([task("b", "p", payload: "b2")])
            let refusedRevision = try await parallel.finishParallel(
                [TaskParallelOutcome(claim: claims[0], result: .completed), TaskParallelOutcome(claim: claims[1], result: .completed)], owner: "w1"
            )
            try expect(refusedRevision.map(\.task.key) == ["b"], "a replaced action's outcome is refused, the other stored: \(refusedRevision)")
            let again = try await parallel.claimParallel(.prefix("p"), limit: 5, owner: "w2", leaseDuration: .seconds(30), now: Date())
            try expect(again.map(\.task.payload) == [Data("b2".utf8)], "the replacement is ready at once, and a is done: \(again)")
            try expect(try await parallel.finishParallel([TaskParallelOutcome(claim: again[0], result: .completed)], owner: "w2").isEmpty, "stored")
            try expect(try await parallel.parallelCounts().isEmpty, "nothing is left")
        },
        Check("a failure counts its attempt and waits for its retry time; the last one is a dead letter; a held action waits for a broker") { storage in
            let parallel = try parallelStorage(storage)
            _ = try await parallel.saveParallel([task("a", "p"), task("b", "p"), task("c", "p")])
            let now = Date(timeIntervalSince1970: 2_000_000_000)
            var claims = try await parallel.claimParallel(.prefix("p"), limit: 3, owner: "w", leaseDuration: .seconds(30), now: now)
            let failure = TaskFailure(reason: "server said 503", failedAt: Date(timeIntervalSince1970: 1_999_999_999.5))
            for index in claims.indices { claims[index].task.lastFailure = failure }
            let refused = try await parallel.finishParallel([
                TaskParallelOutcome(claim: claims[0], result: .failed(retryAt: now.addingTimeInterval(100))),
                TaskParallelOutcome(claim: claims[1], result: .deadLettered),
                TaskParallelOutcome(claim: claims[2], result: .held),
            ], owner: "w")
            try expect(refused.isEmpty, "every outcome is stored: \(refused)")
            try expect(try await parallel.claimParallel(.prefix("p"), limit: 3, owner: "w", leaseDuration: .seconds(30), now: now).isEmpty,
                       "nothing is ready before the retry time")
            let next = try await parallel.nextParallelTime(.prefix("p"), owner: "w", now: now)
            try expect(next.map { abs($0.timeIntervalSince(now.addingTimeInterval(100))) < 0.001 } == true, "the retry time is the next: \(String(describing: next))")
            let retried = try await parallel.claimParallel(.prefix("p"), limit: 3, owner: "w", leaseDuration: .seconds(30), now: now.addingTimeInterval(100))
            try expect(retried.map(\.task.key) == ["a"] && retried[0].task.attempts == 1 && retried[0].task.lastFailure == failure,
                       "at its time it is claimed, with its attempt and failure: \(retried)")
            try expect(try await parallel.deleteParallel(key: "a", collection: "c")?.key == "a", "a claimed action is deleted")
            try expect(try await parallel.finishParallel([TaskParallelOutcome(claim: retried[0], result: .completed)], owner: "w").count == 1,
                       "a deleted action's outcome is refused")
            try expect(try await parallel.lookupParallel(key: "a", collection: "c") == nil, "and it is gone")
            let letters = try await parallel.parallelDeadLetters(queueName: nil)
            try expect(letters.map(\.key) == ["b"] && letters[0].attempts == 1 && letters[0].lastFailure == failure, "b is a dead letter: \(letters)")
            try expect(try await parallel.lookupParallel(key: "b", collection: "c") == .deadLetter(letters[0]), "found as a dead letter")
            let counts = try await parallel.parallelCounts()
            try expect(counts["p"]?.pending == 1 && counts["p"]?.deadLetters == 1, "counted: \(counts)")
            try expect(try await parallel.replayParallelDeadLetter(key: "c", collection: "c") == nil, "a held action is no dead letter")
            let replayed = try await parallel.replayParallelDeadLetter(key: "b", collection: "c")
            try expect(replayed?.attempts == 0 && replayed?.lastFailure == nil && (replayed?.revision ?? 0) > letters[0].revision, "replayed: \(String(describing: replayed))")
            let replayedClaim = try await parallel.claimParallel(.prefix("p"), limit: 3, owner: "w", leaseDuration: .seconds(30), now: now.addingTimeInterval(100))
            try expect(replayedClaim.map(\.task.key) == ["b"], "the replayed action is ready; the held one is not: \(replayedClaim.map(\.task.key))")
            try await parallel.releaseHeldParallel(.prefix("other"))
            try expect(try await parallel.claimParallel(.prefix("p"), limit: 3, owner: "w", leaseDuration: .seconds(30), now: now.addingTimeInterval(100)).isEmpty,
                       "another scope's start leaves it held")
            try await parallel.releaseHeldParallel(.prefix("p"))
            let held = try await parallel.claimParallel(.prefix("p"), limit: 3, owner: "w", leaseDuration: .seconds(30), now: now.addingTimeInterval(100))
            try expect(held.map(\.task.key) == ["c"] && held[0].task.attempts == 1, "released by its scope's start: \(held)")
            try expect(try await parallel.finishParallel([TaskParallelOutcome(claim: held[0], result: .deadLettered)], owner: "w").isEmpty, "stored")
            try expect(try await parallel.discardParallelDeadLetter(key: "c", collection: "c")?.key == "c", "discarded")
            try expect(try await parallel.discardParallelDeadLetter(key: "c", collection: "c") == nil, "once")
        },
        Check("an action saved to run later is claimed at its time; an operator's pause holds its queue") { storage in
            let parallel = try parallelStorage(storage)
            let now = Date(timeIntervalSince1970: 2_000_000_000)
            _ = try await parallel.saveParallel([
                NewTask(key: "later", collection: "c", queueName: "p-1", payload: Data(), notBefore: now.addingTimeInterval(60)),
                task("paused", "p-2"),
            ])
            try expect(try await storage.setPaused(true, queues: ["p-2"]) == ["p-2"], "p-2 is paused")
            try expect(try await parallel.claimParallel(.prefix("p"), limit: 5, owner: "w", leaseDuration: .seconds(30), now: now).isEmpty,
                       "neither is ready")
            let next = try await parallel.nextParallelTime(.prefix("p"), owner: "w", now: now)
            try expect(next.map { abs($0.timeIntervalSince(now.addingTimeInterval(60))) < 0.001 } == true, "its time is next: \(String(describing: next))")
            let due = try await parallel.claimParallel(.prefix("p"), limit: 5, owner: "w", leaseDuration: .seconds(30), now: now.addingTimeInterval(60))
            try expect(due.map(\.task.key) == ["later"], "claimed at its time: \(due.map(\.task.key))")
            _ = try await storage.setPaused(false, queues: ["p-2"])
            let resumed = try await parallel.claimParallel(.prefix("p"), limit: 5, owner: "w", leaseDuration: .seconds(30), now: now.addingTimeInterval(60))
            try expect(resumed.map(\.task.key) == ["paused"], "resumed, it is ready: \(resumed.map(\.task.key))")
        },
        Check("a claim lasts its lease: renewed it holds, expired another owner takes the action and the first is fenced; a release frees it at once") { storage in
            let parallel = try parallelStorage(storage)
            _ = try await parallel.saveParallel([task("a", "p"), task("b", "p")])
            // Long enough that a loaded machine does not see it end before the first checks (400 ms
            // did, once in CI beside other builds: the owner's expiry was past when read back).
            let lease = Duration.seconds(2)
            let claims = try await parallel.claimParallel(.prefix("p"), limit: 2, owner: "w1", leaseDuration: lease, now: Date())
            let expiry = try await parallel.nextParallelTime(.prefix("p"), owner: "w2", now: Date())
            try expect(expiry.map { $0 > Date().addingTimeInterval(-1) } == true, "another owner learns when w1's claims expire: \(String(describing: expiry))")
            try expect(try await parallel.nextParallelTime(.prefix("p"), owner: "w1", now: Date()) == nil, "w1 is not woken by its own claims")
            try expect(try await renewing(claims, owner: "w1", in: parallel).isEmpty, "w1 still holds both")
            try await parallel.releaseParallel([claims[1]], owner: "w1")
            let released = try await parallel.claimParallel(.prefix("p"), limit: 2, owner: "w2", leaseDuration: .seconds(30), now: Date())
            try expect(released.map(\.task.key) == ["b"] && released[0].token > claims[1].token, "a released action is claimed at once: \(released)")
            // Waits for w1's lease on a to end, on the backend's clock.
            // One at a time: w2's own claim of b (made later) may expire too on a backend with a short lease.
            var taken = try await parallel.claimParallel(.prefix("p"), limit: 1, owner: "w2", leaseDuration: .seconds(30), now: Date())
            for _ in 0..<200 where taken.isEmpty {
                let next = try await parallel.nextParallelTime(.prefix("p"), owner: "w2", now: Date())
                try await Task.sleep(for: .milliseconds(max(10, min(200, Int((next ?? Date()).timeIntervalSinceNow * 1000) + 5))))
                taken = try await parallel.claimParallel(.prefix("p"), limit: 1, owner: "w2", leaseDuration: .seconds(30), now: Date())
            }
            try expect(taken.map(\.task.key) == ["a"] && taken[0].token > claims[0].token, "w2 takes a over after the lease: \(taken)")
            try expect(try await renewing([claims[0]], owner: "w1", in: parallel).map(\.task.key) == ["a"], "w1's renewal finds it lost")
            let fenced = try await parallel.finishParallel([TaskParallelOutcome(claim: claims[0], result: .completed)], owner: "w1")
            try expect(fenced.map(\.task.key) == ["a"], "w1's outcome is refused: \(fenced)")
            try expect(try await parallel.finishParallel([TaskParallelOutcome(claim: taken[0], result: .completed)], owner: "w2").isEmpty, "w2's is stored")
            try expect(try await parallel.parallelCounts()["p"]?.pending == 1, "b is left")
        },
    ]

    /// The checks of a shared backend's plain parallel actions: every process hears of a save.
    public static let sharedParallelChecks: [Check] = [
        Check("a worker holding plain parallel actions is listed with how many and until when") { storage in
            let parallel = try parallelStorage(storage)
            _ = try await parallel.saveParallel([task("a", "p-1"), task("b", "p-1"), task("c", "p-2")])
            let claims = try await parallel.claimParallel(.prefix("p-"), limit: 2, owner: "gamma#1@process-3", leaseDuration: .seconds(30), now: Date())
            try expect(claims.count == 2, "two claimed: \(claims)")
            let workers = try await storage.workers()
            try expect(workers.map(\.owner) == ["gamma#1@process-3"] && workers[0].parallelActions == 2, "\(workers)")
            try expect(workers[0].queues.isEmpty && workers[0].parallelExpiresAt.map { $0 > Date().addingTimeInterval(-60) } == true, "\(workers)")
            try await parallel.releaseParallel(claims, owner: "gamma#1@process-3")
            try expect(try await storage.workers().isEmpty, "released: no worker holds anything")
        },
        Check("a save of plain parallel actions, and a release, are heard on the change feed with their queues") { storage in
            let parallel = try parallelStorage(storage)
            guard let feed = try await storage.changes() else {
                throw TaskStorageConformanceFailure("a shared backend has a change feed")
            }
            var iterator = feed.makeAsyncIterator()
            _ = try await parallel.saveParallel([task("a", "p-1"), task("b", "p-2"), task("c", "p-1")])
            var heard: Set<String> = []
            while heard != ["p-1", "p-2"], let changes = await iterator.next() {
                for case .parallelReady(let names) in changes { heard.formUnion(names) }
            }
            try expect(heard == ["p-1", "p-2"], "the save's queues are heard: \(heard)")
            let claims = try await parallel.claimParallel(.prefix("p-2"), limit: 1, owner: "w", leaseDuration: .seconds(30), now: Date())
            try await parallel.releaseParallel(claims, owner: "w")
            heard = []
            while heard != ["p-2"], let changes = await iterator.next() {
                for case .parallelReady(let names) in changes { heard.formUnion(names) }
            }
            try expect(heard == ["p-2"], "a released action's queue is heard: \(heard)")
        },
    ]

    /// A renewal of claims, tried again as ``renewing(_:)`` does.
    static func renewing(_ claims: [TaskParallelClaim], owner: String, in parallel: any ParallelTaskStorage) async throws -> [TaskParallelClaim] {
        try await renewing { try await parallel.renewParallel(claims, owner: owner, leaseDuration: .milliseconds(400)) }
    }

    static func parallelStorage(_ storage: any TaskStorage) throws -> any ParallelTaskStorage {
        guard let parallel = storage as? any ParallelTaskStorage else {
            throw TaskStorageConformanceFailure("the backend stores no plain parallel actions (it is no ParallelTaskStorage)")
        }
        return parallel
    }
}

import Foundation
import TaskBrokerCore

extension TaskStorageConformance {
    /// The checks of what a job system keeps with each action: its earliest start, its priority
    /// and its last failure.
    static let jobChecks: [Check] = [
        Check("an action's trace context is stored with it, every read returns it, and a re-save replaces it") { storage in
            let headers = ["traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": "k=v"]
            let saved = try await storage.save([
                NewTask(key: "a", collection: "c", queueName: "q", payload: Data("a".utf8), traceContext: headers),
                task("b", "q"),
            ])
            try expect(saved.map(\.traceContext) == [headers, [:]], "the save returns them: \(saved.map(\.traceContext))")
            let read = try await storage.tasks(inQueue: "q")
            try expect(read.map(\.traceContext) == [headers, [:]], "a read returns them: \(read.map(\.traceContext))")
            let ahead = try await storage.tasks(inQueues: ["q"], after: [:], limit: 1)
            try expect(ahead["q"]?.first?.traceContext == headers, "a read-ahead returns it")
            try expect(try await storage.lookup(key: "a", collection: "c")?.task.traceContext == headers, "a lookup returns it")
            _ = try await storage.save([NewTask(key: "a", collection: "c", queueName: "q", payload: Data("a2".utf8))])
            try expect(try await storage.tasks(inQueue: "q").first?.traceContext == [:], "a re-save without one clears it")
        },
        Check("a save stores its not-before time and priority, and every read returns them") { storage in
            let later = Date(timeIntervalSince1970: 2_000_000_000.5)
            let saved = try await storage.save([
                NewTask(key: "a", collection: "c", queueName: "q1", payload: Data("a".utf8), notBefore: later, priority: 5),
                task("b", "q1"),
                NewTask(key: "c", collection: "c", queueName: "q2", payload: Data("c".utf8), priority: -3),
            ])
            try expect(saved[0].notBefore == later && saved[0].priority == 5, "save returns what it stored: \(saved[0])")
            try expect(saved[1].notBefore == nil && saved[1].priority == 0, "by default: at once, priority 0: \(saved[1])")
            let whole = try await storage.tasks(inQueue: "q1")
            let limited = try await storage.tasks(inQueues: ["q1", "q2"], after: [:], limit: 10)
            let many = try await storage.tasks(inQueues: ["q1", "q2"])
            for (read, tasks) in [("tasks(inQueue:)", whole), ("a limited read", limited["q1"] ?? []), ("tasks(inQueues:)", many["q1"] ?? [])] {
                try expect(tasks.map(\.key) == ["a", "b"], "\(read) returns q1's actions in order: \(tasks.map(\.key))")
                try expect(tasks.first?.notBefore == later && tasks.first?.priority == 5, "\(read) returns a's time and priority: \(tasks)")
                try expect(tasks.last?.notBefore == nil && tasks.last?.priority == 0, "\(read) returns b as saved: \(tasks)")
                try expect(tasks.allSatisfy { $0.lastFailure == nil }, "\(read): no failure is on record")
            }
            try expect(limited["q2"]?.first?.priority == -3, "a negative priority is stored: \(limited["q2"] ?? [])")
        },
        Check("a failure stores its reason and time; a re-save clears them and takes its own time and priority") { storage in
            let saved = try await storage.save([task("a", "q1"), task("b", "q2")])
            var failed = saved[0]
            let failure = TaskFailure(reason: "timed out after 30 seconds", failedAt: Date(timeIntervalSince1970: 1_900_000_000.25))
            failed.lastFailure = failure
            try await settle(storage, [.failed(failed, pause: .untilRestart), .failed(saved[1], pause: nil)])
            let stored = try await storage.tasks(inQueue: "q1")
            try expect(stored.first?.lastFailure == failure && stored.first?.attempts == 1, "the failure is stored: \(stored)")
            try expect(try await storage.tasks(inQueue: "q2").first?.lastFailure == nil, "a failure without a record stores none")
            let snapshot = try await storage.snapshot()
            try expect(snapshot.first?.lastFailure == failure, "the snapshot shows the head's last failure: \(snapshot)")
            let later = Date(timeIntervalSince1970: 2_100_000_000)
            _ = try await storage.save([NewTask(key: "a", collection: "c", queueName: "q1", payload: Data("a2".utf8), notBefore: later, priority: 2)])
            let again = try await storage.tasks(inQueue: "q1")
            try expect(again.count == 1 && again[0].lastFailure == nil && again[0].attempts == 0 && again[0].pause == nil, "a re-save clears the failure: \(again)")
            try expect(again[0].notBefore == later && again[0].priority == 2, "a re-save takes its own time and priority: \(again)")
            _ = try await storage.save([task("a", "q1")])
            let plain = try await storage.tasks(inQueue: "q1")
            try expect(plain.first?.notBefore == nil && plain.first?.priority == 0, "a plain re-save runs at once, priority 0: \(plain)")
        },
            Check("an action that failed for the last time is a dead letter: no read of its queue returns it") { storage in
            let saved = try await storage.save([task("a", "q1"), task("b", "q1"), task("c", "q2")])
            var last = saved[0]
            let failure = TaskFailure(reason: "no such address", failedAt: Date(timeIntervalSince1970: 1_900_000_000.5))
            last.lastFailure = failure
            try await settle(storage, [.deadLettered(last)])
            let whole = try await storage.tasks(inQueue: "q1")
            let limited = try await storage.tasks(inQueues: ["q1"], after: [:], limit: 10)["q1"] ?? []
            try expect(whole.map(\.key) == ["b"] && limited.map(\.key) == ["b"], "the queue goes on without it: \(whole.map(\.key)), \(limited.map(\.key))")
            let letters = try await storage.deadLetters(queueName: nil)
            try expect(letters.map(\.key) == ["a"], "it is a dead letter: \(letters.map(\.key))")
            try expect(letters.first?.attempts == 1 && letters.first?.lastFailure == failure, "with its attempts and failure: \(letters)")
            try expect(try await storage.deadLetters(queueName: "q2").isEmpty, "another queue has none")
            let snapshot = try await storage.snapshot()
            try expect(snapshot.first { $0.name == "q1" }?.deadLetters == 1 && snapshot.first { $0.name == "q1" }?.pending == 1, "\(snapshot)")
        },
        Check("a replayed dead letter is back at its place with a new revision and no attempts; a discarded one is gone") { storage in
            let saved = try await storage.save([task("a", "q1"), task("b", "q1"), task("c", "q1")])
            var failed = saved[0]
            failed.lastFailure = TaskFailure(reason: "bad", failedAt: Date(timeIntervalSince1970: 1_900_000_000))
            try await settle(storage, [.deadLettered(failed)])
            try expect(try await storage.replayDeadLetter(key: "b", collection: "c") == nil, "a ready action is no dead letter")
            let replayed = try await storage.replayDeadLetter(key: "a", collection: "c")
            try expect(replayed?.position == saved[0].position && (replayed?.revision ?? 0) > saved[2].revision, "a new save at its place: \(String(describing: replayed))")
            try expect(replayed?.attempts == 0 && replayed?.lastFailure == nil && replayed?.pause == nil, "from zero: \(String(describing: replayed))")
            try expect(try await storage.tasks(inQueue: "q1").map(\.key) == ["a", "b", "c"], "back at the head")
            try expect(try await storage.deadLetters(queueName: nil).isEmpty, "no dead letter is left")
            try await settle(storage, [.deadLettered(try await storage.tasks(inQueue: "q1")[0])])
            try expect(try await storage.discardDeadLetter(key: "b", collection: "c") == nil, "a ready action is not discarded")
            try expect(try await storage.discardDeadLetter(key: "a", collection: "c")?.key == "a", "discard returns the dead letter")
            try expect(try await storage.discardDeadLetter(key: "a", collection: "c") == nil, "discarding twice finds nothing")
            try expect(try await storage.deadLetters(queueName: nil).isEmpty, "the discarded dead letter is gone")
            try expect(try await storage.tasks(inQueue: "q1").map(\.key) == ["b", "c"], "the queue's actions stay")
        },
        Check("a lookup by key finds a live action and a dead letter as such, and nothing once completed") { storage in
            let saved = try await storage.save([task("a", "q1"), task("b", "q1"), task("c", "q2")])
            try await settle(storage, [.deadLettered(saved[0])])
            let dead = try await storage.lookup(key: "a", collection: "c")
            guard case .deadLetter(let letter)? = dead else { throw TaskStorageConformanceFailure("a is a dead letter: \(String(describing: dead))") }
            try expect(letter.key == "a" && letter.queueName == "q1", "the dead letter as stored: \(letter)")
            let live = try await storage.lookup(key: "b", collection: "c")
            try expect(live == .live(saved[1]), "b is live as saved: \(String(describing: live))")
            try await settle(storage, [.completed(saved[2])])
            try expect(try await storage.lookup(key: "c", collection: "c") == nil, "a completed action is no longer stored")
            try expect(try await storage.lookup(key: "zz", collection: "c") == nil, "an unknown key finds nothing")
        },
        Check("a queue whose only actions are dead letters shows in the snapshot") { storage in
            let saved = try await storage.save([task("a", "q1")])
            try await settle(storage, [.deadLettered(saved[0])])
            let snapshot = try await storage.snapshot()
            try expect(snapshot.map(\.name) == ["q1"] && snapshot.first?.pending == 0 && snapshot.first?.deadLetters == 1, "\(snapshot)")
            try expect(try await storage.tasks(inQueue: "q1").isEmpty, "no read of the queue returns it")
        },
            Check("pausing marks queues, also without actions, and reports those whose mark changed; resuming clears them") { storage in
            _ = try await storage.save([task("a", "q1")])
            try expect(try await storage.pausedQueues(among: nil).isEmpty, "no queue is paused at first")
            try expect(try await storage.setPaused(true, queues: ["q1", "q2"]) == ["q1", "q2"], "both are paused")
            try expect(try await storage.setPaused(true, queues: ["q2"]).isEmpty, "pausing again changes nothing")
            try expect(try await storage.pausedQueues(among: nil) == ["q1", "q2"], "both are listed")
            try expect(try await storage.pausedQueues(among: ["q1", "q3"]) == ["q1"], "only those asked about")
            try expect(try await storage.tasks(inQueue: "q1").map(\.key) == ["a"], "a paused queue keeps its actions")
            try expect(try await storage.setPaused(false, queues: ["q1", "q3"]) == ["q1"], "only q1 was paused")
            try expect(try await storage.pausedQueues(among: nil) == ["q2"], "q2 stays paused")
        },
        Check("a unique save stores only when no action of its key and collection is stored, dead letters included") { storage in
            let first = try await storage.saveIfAbsent(task("a", "q1", payload: "first"))
            try expect(first?.key == "a", "an absent key is stored: \(String(describing: first))")
            try expect(try await storage.saveIfAbsent(task("a", "q2", payload: "second")) == nil, "a stored key is not saved again")
            let stored = try await storage.tasks(inQueue: "q1")
            try expect(stored.map(\.payload) == [Data("first".utf8)], "the first save stays as it was")
            try expect(try await storage.tasks(inQueue: "q2").isEmpty, "the second save stored nothing")
            try await settle(storage, [.deadLettered(stored[0])])
            try expect(try await storage.saveIfAbsent(task("a", "q1")) == nil, "a dead letter counts as stored")
            _ = try await storage.discardDeadLetter(key: "a", collection: "c")
            let b = try await storage.save([task("b", "q1")])
            try await settle(storage, [.completed(b[0])])
            try expect(try await storage.saveIfAbsent(task("b", "q1")) != nil, "a completed action's key may be saved again")
            try expect(try await storage.saveIfAbsent(task("a", "q1")) != nil, "so may a discarded dead letter's")
            try expect(try await storage.tasks(inQueue: "q1").map(\.key) == ["b", "a"], "both are stored, in save order")
        },
        Check("a tick is recorded once, with its action; an earlier or equal tick saves nothing; a stored key is kept") { storage in
            let first = Date(timeIntervalSince1970: 1_800_000_000)
            let second = first.addingTimeInterval(60)
            try await storage.registerSchedules([TaskScheduleState(name: "s", recurrence: "every 60 seconds", nextTick: first)])
            let listed = try await storage.schedules()
            try expect(listed == [TaskScheduleState(name: "s", recurrence: "every 60 seconds", nextTick: first)], "a registered schedule is listed with its next tick: \(listed)")
            let recorded = try await storage.recordTick(schedule: "s", tick: first, next: second, task: task("s@1", "ticks"))
            guard case .enqueued(let stored) = recorded else { throw TaskStorageConformanceFailure("the first tick saves its action: \(recorded)") }
            try expect(stored.key == "s@1" && stored.queueName == "ticks", "the stored action is the tick's: \(stored)")
            for tick in [first, first.addingTimeInterval(-60)] {
                let again = try await storage.recordTick(schedule: "s", tick: tick, next: second, task: task("s@other", "ticks"))
                try expect(again == .alreadyRecorded(lastTick: first), "a tick at or before the last saves nothing: \(again)")
            }
            try expect(try await storage.tasks(inQueue: "ticks").map(\.key) == ["s@1"], "one action for the tick")
            // The same key, still stored: the tick is recorded and nothing is saved.
            let kept = try await storage.recordTick(schedule: "s", tick: second, next: nil, task: task("s@1", "ticks", payload: "new"))
            try expect(kept == .keyStillStored, "a tick whose key is still stored saves nothing: \(kept)")
            try expect(try await storage.tasks(inQueue: "ticks").map(\.payload) == [Data("s@1".utf8)], "the stored action is unchanged")
            // Registering again keeps the last tick.
            try await storage.registerSchedules([TaskScheduleState(name: "s", recurrence: "every 2 minutes", nextTick: second.addingTimeInterval(120))])
            let state = try await storage.schedules().first
            try expect(state?.lastTick == second && state?.lastKey == "s@1" && state?.recurrence == "every 2 minutes"
                && state?.nextTick == second.addingTimeInterval(120) && state?.lastEnqueuedAt != nil, "the state after two ticks and a registration: \(String(describing: state))")
            // A schedule recorded without a registration first is listed too.
            _ = try await storage.recordTick(schedule: "t", tick: first, next: nil, task: task("t@1", "ticks"))
            try expect(try await storage.schedules().map(\.name) == ["s", "t"], "both schedules are listed by name")
        },
        Check("starts are granted up to a rate limit per window, per bucket, with the wait for the next") { storage in
            // In real time (a shared backend counts by its server's clock): a minute's window
            // does not end during the check.
            let now = Date()
            let first = try await storage.acquireStarts(bucket: "prefix:mail-", limit: 3, period: .seconds(60), count: 2, now: now)
            try expect(first.granted == 2 && first.retryAfter == nil, "two of three: \(first)")
            let second = try await storage.acquireStarts(bucket: "prefix:mail-", limit: 3, period: .seconds(60), count: 2, now: now)
            try expect(second.granted == 1, "the third, and no fourth: \(second)")
            guard let wait = second.retryAfter else { throw TaskStorageConformanceFailure("a full window says when a start is free: \(second)") }
            try expect(wait > .zero && wait <= .seconds(60), "the oldest start leaves the window within a minute: \(wait)")
            let full = try await storage.acquireStarts(bucket: "prefix:mail-", limit: 3, period: .seconds(60), count: 1, now: now)
            try expect(full.granted == 0 && full.retryAfter != nil, "a full window grants nothing: \(full)")
            let other = try await storage.acquireStarts(bucket: "queue:mail-7", limit: 3, period: .seconds(60), count: 5, now: now)
            try expect(other.granted == 3, "another bucket counts on its own: \(other)")
            // A start given back (a claim refused) counts no more: one is free again, and only one.
            try await storage.releaseStarts(bucket: "prefix:mail-", at: second.at, count: 1)
            let again = try await storage.acquireStarts(bucket: "prefix:mail-", limit: 3, period: .seconds(60), count: 2, now: now)
            try expect(again.granted == 1, "the start given back is granted again: \(again)")
            // What an operator reads: each bucket's starts in their windows, the latest, and when the last leaves.
            let usage = try await storage.rateLimitUsage(now: now)
            try expect(usage.map(\.bucket) == ["prefix:mail-", "queue:mail-7"] && usage.map(\.starts) == [3, 3], "both buckets, full: \(usage)")
            try expect(usage[0].latestStart == again.at, "the latest start is the last grant's: \(usage[0]) against \(again.at)")
            let ends = usage[0].emptyAt.timeIntervalSince(again.at)
            try expect(abs(ends - 60) < 0.001, "the bucket is empty a period after its latest start: \(ends) s")
        },
        Check("the snapshot says when each queue's longest-waiting action was saved; a replacement keeps the time") { storage in
            // Saved times come from the backend's clock (the server's on PostgreSQL): a minute either way.
            let before = Date().addingTimeInterval(-60)
            let saved = try await storage.save([task("a", "q1"), task("b", "q1"), task("c", "q2")])
            let after = Date().addingTimeInterval(60)
            let first = try await storage.snapshot()
            guard let q1 = first.first(where: { $0.name == "q1" })?.oldestSavedAt,
                  let q2 = first.first(where: { $0.name == "q2" })?.oldestSavedAt else {
                throw TaskStorageConformanceFailure("every queue with pending actions has a saved time: \(first)")
            }
            try expect(q1 > before && q1 < after && q2 > before && q2 < after, "saved just now: \(q1), \(q2)")
            _ = try await storage.save([task("a", "q1", payload: "a2")])
            let replaced = try await storage.snapshot().first { $0.name == "q1" }?.oldestSavedAt
            try expect(replaced == q1, "a replacement keeps the saved time: \(String(describing: replaced)) vs \(q1)")
            try await settle(storage, [.completed(saved[2])])
            try expect(try await storage.snapshot().first { $0.name == "q2" } == nil, "an emptied queue is not listed")
        },
    ]

    /// The shared checks of what a job system adds.
    static let sharedJobChecks: [Check] = [
        Check("a paused queue's head is not claimed, and a finish claims no next head of it") { storage in
            let saved = try await storage.save([task("a", "q1"), task("b", "q1"), task("c", "q2")])
            let epochs = try granted(try await storage.claim([saved[0]], owner: "w", leaseDuration: .seconds(30)), "a is claimed")
            _ = try await storage.setPaused(true, queues: ["q1", "q2"])
            let report = try await storage.finish([.completed(saved[0], epoch: epochs[0])], claimingNext: ["q1": saved[1]], owner: "w", leaseDuration: .seconds(30))
            try expect(report.continued.isEmpty, "the running action's outcome is stored, and b is not claimed: \(report)")
            try expect(try await storage.tasks(inQueue: "q1").map(\.key) == ["b"], "a is done")
            let refused = try await storage.claim([saved[1], saved[2]], owner: "w2", leaseDuration: .seconds(30))
            try expect(refused.allSatisfy { $0.grantedEpoch == nil }, "no head of a paused queue is granted: \(refused)")
            _ = try await storage.setPaused(false, queues: ["q1"])
            _ = try granted(try await storage.claim([saved[1]], owner: "w2", leaseDuration: .seconds(30)), "resumed, its head is granted")
        },
    ]
}

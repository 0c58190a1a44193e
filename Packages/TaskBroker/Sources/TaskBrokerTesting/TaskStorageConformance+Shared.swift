import Foundation
import TaskBrokerCore

extension TaskStorageConformance {
    /// The shared checks of leases, fencing and the change feed.
    static let sharedQueueChecks: [Check] = [
        Check("the workers are the lease holders, each with the queues it holds, their epochs and when they end") { storage in
            let saved = try await storage.save([task("a", "q1"), task("b", "q2"), task("c", "q3")])
            try expect(try await storage.workers().isEmpty, "no lease, no worker")
            let alpha = "alpha#1@process-1"
            let beta = "beta#7@process-2"
            let alphas = try granted(try await storage.claim([saved[0], saved[1]], owner: alpha, leaseDuration: .seconds(30)), "alpha claims")
            let betas = try granted(try await storage.claim([saved[2]], owner: beta, leaseDuration: .seconds(30)), "beta claims")
            let now = Date()
            let workers = try await storage.workers()
            try expect(workers.map(\.owner) == [alpha, beta], "one worker per owner, sorted: \(workers)")
            try expect(workers[0].queues.map(\.queueName) == ["q1", "q2"] && workers[1].queues.map(\.queueName) == ["q3"], "\(workers)")
            try expect(workers[0].brokerName == "alpha" && workers[0].process == "process-1" && workers[1].brokerName == "beta", "\(workers)")
            for lease in workers.flatMap(\.queues) {
                // The server's clock decides expiry on a shared backend: a minute either way.
                try expect(lease.epoch >= 1 && lease.expiresAt > now.addingTimeInterval(-60), "a live lease: \(lease)")
            }
            try expect(workers.flatMap(\.queues).map(\.epoch) == alphas + betas, "the epochs the claims were granted: \(workers)")
            try await storage.release([TaskQueueLease(queueName: "q1", epoch: alphas[0])], owner: alpha)
            _ = try await storage.finish([.completed(saved[2], epoch: betas[0])], owner: beta)
            // Renewed just before the read: however long the steps above took, q2's lease is live.
            try expect(
                try await renewing([TaskQueueLease(queueName: "q2", epoch: alphas[1])], owner: alpha, in: storage).isEmpty, "alpha still holds q2"
            )
            let after = try await storage.workers()
            try expect(after.map(\.owner) == [alpha] && after[0].queues.map(\.queueName) == ["q2"], "a released or finished lease is gone: \(after)")
        },
        Check("a queue's lease keeps a second owner off until the first releases it") { storage in
            let saved = try await storage.save([task("a", "q1"), task("b", "q1")])
            let first = try granted(try await storage.claim([saved[0]], owner: "w1", leaseDuration: .seconds(30)), "w1 claims")
            let second = try await storage.claim([saved[0]], owner: "w2", leaseDuration: .seconds(30))
            guard case .heldElsewhere(let until)? = second.first else {
                throw TaskStorageConformanceFailure("w2 is held off while w1 holds the lease: \(second)")
            }
            try expect(until > Date(), "the lease ends in the future: \(until)")
            try expect(try await storage.finish([.completed(saved[0], epoch: first[0])], owner: "w1") == TaskFinishReport(), "w1's outcome is stored")
            _ = try granted(try await storage.claim([saved[1]], owner: "w2", leaseDuration: .seconds(30)), "released: w2 claims the next head")
        },
        Check("a lease its holder releases is free at once, waiting workers hear of it, and a second release changes nothing") { storage in
            guard let feed = try await storage.changes() else { throw TaskStorageConformanceFailure("a shared backend has a change feed") }
            var iterator = feed.makeAsyncIterator()
            let saved = try await storage.save([task("a", "q1")])
            try expect(await iterator.next() == [.queuesChanged(["q1"])], "the save is heard")
            let w1 = try granted(try await storage.claim(saved, owner: "w1", leaseDuration: .seconds(30)), "w1 claims")
            try await storage.release([TaskQueueLease(queueName: "q1", epoch: w1[0])], owner: "w1")
            try expect(await iterator.next() == [.queuesChanged(["q1"])], "the release is heard: workers waiting for the lease claim again")
            let w2 = try granted(try await storage.claim(saved, owner: "w2", leaseDuration: .seconds(30)), "released: w2 claims at once")
            try expect(w2[0] > w1[0], "a new holder, a new epoch: \(w1) then \(w2)")
            // w1's claim is gone: releasing again leaves w2's lease alone.
            try await storage.release([TaskQueueLease(queueName: "q1", epoch: w1[0])], owner: "w1")
            guard case .heldElsewhere? = try await storage.claim(saved, owner: "w3", leaseDuration: .seconds(30)).first else {
                throw TaskStorageConformanceFailure("w2 still holds the lease after w1 released it again")
            }
            try expect(try await storage.finish([.completed(saved[0], epoch: w2[0])], owner: "w2") == TaskFinishReport(), "w2's outcome is stored")
        },
        Check("a claim is refused for a head that is gone, replaced, failed since, or waits for a restart") { storage in
            let saved = try await storage.save([task("a", "q1"), task("b", "q2"), task("c", "q3"), task("d", "q4")])
            _ = try await storage.delete(key: "a", collection: "c")
            _ = try await storage.save([task("b", "q2", payload: "again")])
            try await settle(storage, [.failed(saved[2], pause: nil), .failed(saved[3], pause: .untilRestart)])
            let d = try await storage.tasks(inQueue: "q4")[0]
            let results = try await storage.claim([saved[0], saved[1], saved[2], d], owner: "w2", leaseDuration: .seconds(30))
            try expect(results == [.changed, .changed, .changed, .changed], "every stale head is refused: \(results)")
        },
        Check("an expired lease is taken over with a new epoch, and the old holder's outcome changes nothing") { storage in
            let saved = try await storage.save([task("a", "q1")])
            let w1 = try granted(try await storage.claim(saved, owner: "w1", leaseDuration: .seconds(1)), "w1 claims")
            // w1 stops renewing (it died or was cut off): w2 gets the queue once the lease expires.
            let w2 = try await takeOver(saved[0], by: "w2", in: storage)
            try expect(w2 > w1[0], "the takeover's epoch is newer: \(w1) then \(w2)")
            let w1Lease = TaskQueueLease(queueName: "q1", epoch: w1[0])
            try expect(try await renewing([w1Lease], owner: "w1", in: storage) == [w1Lease], "w1's renewal reports the lease lost")
            let late = try await storage.finish([.failed(saved[0], pause: .untilRestart, epoch: w1[0])], owner: "w1")
            try expect(late.fenced == ["q1"], "w1's late outcome is refused: \(late)")
            // The holder's name with the old epoch is no lease either: the epoch fences, not the name.
            let stale = try await storage.finish([.failed(saved[0], pause: .untilRestart, epoch: w1[0])], owner: "w2")
            try expect(stale.fenced == ["q1"], "an outcome under the old epoch is refused, whoever sends it: \(stale)")
            let stored = try await storage.tasks(inQueue: "q1")
            try expect(stored.first?.attempts == 0 && stored.first?.pause == nil, "nothing of it was stored")
            try expect(try await storage.finish([.completed(saved[0], epoch: w2)], owner: "w2") == TaskFinishReport(), "w2's outcome is stored")
            try expect(try await storage.queueNames().isEmpty, "w2 completed it")
        },
        Check("a finish claims a completed queue's next head: the lease stays with its holder, under its epoch") { storage in
            let saved = try await storage.save([
                task("a", "q1"), task("b", "q1"),  // a completes and claims b
                task("c", "q2"), task("d", "q2"),  // c completes; d was saved again since: not claimed
                task("e", "q3"), task("f", "q3"),  // e fails: nothing is claimed
                task("g", "q4"),                   // g completes; its "next head" is another queue's action
            ])
            let (a, b, c, d, e, f, g) = (saved[0], saved[1], saved[2], saved[3], saved[4], saved[5], saved[6])
            let w1 = try granted(try await storage.claim([a, c, e, g], owner: "w1", leaseDuration: .seconds(30)), "w1 claims")
            let newD = try await storage.save([task("d", "q2", payload: "again")])[0]
            let report = try await storage.finish(
                [.completed(a, epoch: w1[0]), .completed(c, epoch: w1[1]), .failed(e, pause: nil, epoch: w1[2]), .completed(g, epoch: w1[3])],
                claimingNext: ["q1": b, "q2": d, "q3": f, "q4": a], owner: "w1", leaseDuration: .seconds(30)
            )
            try expect(report == TaskFinishReport(continued: ["q1"]), "only q1's next head is claimed: \(report)")
            guard case .heldElsewhere? = try await storage.claim([b], owner: "w2", leaseDuration: .seconds(30)).first else {
                throw TaskStorageConformanceFailure("w1 keeps q1's lease for b")
            }
            // w2 still thinks a is q1's head (a's completion has not reached it): it waits for w1's
            // lease rather than reading q1 again, where w1 goes on completing heads.
            guard case .heldElsewhere? = try await storage.claim([a], owner: "w2", leaseDuration: .seconds(30)).first else {
                throw TaskStorageConformanceFailure("a stale head of a queue another worker holds waits for the lease")
            }
            let failedE = try await storage.tasks(inQueue: "q3")[0]
            _ = try granted(try await storage.claim([newD, failedE], owner: "w2", leaseDuration: .seconds(30)), "the other leases were released as usual")
            // b runs on the lease its predecessor's finish kept: its outcome is stored under that epoch.
            try expect(try await storage.finish([.completed(b, epoch: w1[0])], owner: "w1") == TaskFinishReport(), "b's outcome is stored")
            try expect(try await storage.tasks(inQueue: "q1").isEmpty, "q1 is done")
            try expect(try await storage.tasks(inQueue: "q4").isEmpty, "q4 is done")
            // Released by b's finish, but still w1's under that epoch: renewed, not lost (the broker,
            // which knows it let the lease go, releases it again).
            let kept = TaskQueueLease(queueName: "q1", epoch: w1[0])
            try expect(try await renewing([kept], owner: "w1", in: storage).isEmpty, "a lease released under its epoch is not lost")
            try await storage.release([kept], owner: "w1")
        },
        Check("a lease its holder kept for a next head is taken over once it expires, and the late outcome changes nothing") { storage in
            let saved = try await storage.save([task("a", "q1"), task("b", "q1")])
            let w1 = try granted(try await storage.claim([saved[0]], owner: "w1", leaseDuration: .seconds(1)), "w1 claims")
            let report = try await storage.finish(
                [.completed(saved[0], epoch: w1[0])], claimingNext: ["q1": saved[1]], owner: "w1", leaseDuration: .seconds(1)
            )
            try expect(report.continued == ["q1"], "b is claimed with a's outcome: \(report)")
            // w1 stops (it died before b ran to its end): w2 takes q1 over once the lease expires.
            let w2 = try await takeOver(saved[1], by: "w2", in: storage)
            let late = try await storage.finish([.failed(saved[1], pause: .untilRestart, epoch: w1[0])], owner: "w1")
            try expect(late.fenced == ["q1"], "w1's late outcome is refused: \(late)")
            try expect(try await storage.tasks(inQueue: "q1").first?.attempts == 0, "nothing of it was stored")
            try expect(try await storage.finish([.completed(saved[1], epoch: w2)], owner: "w2") == TaskFinishReport(), "w2's outcome is stored")
        },
        Check("renewing keeps the leases of running actions") { storage in
            let saved = try await storage.save([task("a", "q1")])
            let w1 = try granted(try await storage.claim(saved, owner: "w1", leaseDuration: .seconds(30)), "w1 claims")
            // A renewal gives up after a quarter of the lease and the broker tries again soon after;
            // so does the check, on a machine too loaded to answer in time (a storage failure).
            var lost: [TaskQueueLease]?
            var failures: [String] = []
            for _ in 0..<3 where lost == nil {
                do {
                    lost = try await storage.renew([TaskQueueLease(queueName: "q1", epoch: w1[0])], owner: "w1", leaseDuration: .seconds(30))
                } catch let error as TaskBrokerError where error.code == .storageFailed {
                    failures.append(error.message)
                }
            }
            try expect(lost == [], "nothing is lost: \(String(describing: lost)); failed renewals: \(failures)")
            guard case .heldElsewhere? = try await storage.claim(saved, owner: "w2", leaseDuration: .seconds(30)).first else {
                throw TaskStorageConformanceFailure("the renewed lease still holds w2 off")
            }
        },
        Check("the change feed reports saves, failures and completions committed by anyone") { storage in
            guard let feed = try await storage.changes() else { throw TaskStorageConformanceFailure("a shared backend has a change feed") }
            var iterator = feed.makeAsyncIterator()
            let saved = try await storage.save([task("a", "q1"), task("b", "q2")])
            try expect(await iterator.next() == [.queuesChanged(["q1", "q2"])], "one notification for the save's transaction")
            try await settle(storage, [.completed(saved[0]), .failed(saved[1], pause: .untilRestart)])
            let finished = await iterator.next() ?? []
            try expect(finished.contains(.queuesChanged(["q2"])), "the failure changed q2: \(finished)")
            let completed = finished.compactMap { change -> [String]? in
                if case .completed(let tasks) = change { return tasks.map { "\($0.queueName)/\($0.key)@\($0.revision)" } }
                return nil
            }
            try expect(completed == [["q1/a@\(saved[0].revision)"]], "the completion names the action and revision: \(completed)")
        },
        Check("a finish too large for one notification reports every completion and failure") { storage in
            // 200 completions and 100 failures with keys of ~200 bytes: ~60 KB of changes, far over
            // PostgreSQL's 8,000 bytes per notification. Then a key too long for any notification:
            // listeners still hear of it (or are told to read every queue).
            let long = String(repeating: "k", count: 200)
            let saved = try await storage.save((0..<300).map { task("\(long)-\($0)", "q\($0)") })
            let rest = try await storage.save([task("untouched", "rest")])
            guard let feed = try await storage.changes() else { throw TaskStorageConformanceFailure("a shared backend has a change feed") }
            var iterator = feed.makeAsyncIterator()
            try await settle(storage, saved.enumerated().map { index, task in
                index < 200 ? .completed(task) : .failed(task, pause: nil)
            })
            var completed: Set<String> = []
            var failed: Set<String> = []
            while completed.count < 200 || failed.count < 100, let changes = await iterator.next() {
                for change in changes {
                    switch change {
                    case .completed(let tasks): completed.formUnion(tasks.map { "\($0.queueName)/\($0.key)@\($0.revision)" })
                    case .queuesChanged(let names):
                        try expect(!names.contains("rest"), "no notification was too long (a catch-up read every queue)")
                        failed.formUnion(names)
                    case .spareCapacity, .queuesResumed, .parallelReady:
                        break
                    }
                }
            }
            try expect(completed == Set(saved[..<200].map { "\($0.queueName)/\($0.key)@\($0.revision)" }), "every completion is reported once")
            try expect(failed == Set(saved[200...].map(\.queueName)), "every failure is reported")
            let tooLong = try await storage.save([task(String(repeating: "x", count: 2_000), "huge-" + String(repeating: "h", count: 1_500))])
            try await settle(storage, [.completed(tooLong[0])])
            // Until the catch-up (a notification could not carry it), or the completion itself
            // (the backend delivered it another way, e.g. to its own feed in process).
            var caughtUp = false
            var reported = false
            while !caughtUp, !reported, let changes = await iterator.next() {
                for change in changes {
                    switch change {
                    case .queuesChanged(let names): caughtUp = caughtUp || names.contains(rest[0].queueName)
                    case .completed(let tasks): reported = reported || tasks.contains { $0.key == tooLong[0].key }
                    case .spareCapacity, .queuesResumed, .parallelReady: break
                    }
                }
            }
            try expect(caughtUp || reported, "a completion too long to notify is still heard: reported, or listeners read every queue")
        },
    ]
}

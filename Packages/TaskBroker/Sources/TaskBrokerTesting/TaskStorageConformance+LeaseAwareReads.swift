import Foundation
import TaskBrokerCore

extension TaskStorageConformance {
    /// The checks of a shared backend whose reads give the head alone of a queue another worker
    /// holds (`LeaseAwareReads`): run each against a fresh, empty backend, as ``checks``.
    public static let leaseAwareReadChecks: [Check] = [
        Check("a read gives the head alone of a queue another owner holds, and the first actions of the others") { storage in
            guard let reads = storage as? any LeaseAwareReads else {
                throw TaskStorageConformanceFailure("the backend has no lease-aware reads (it is no LeaseAwareReads)")
            }
            let saved = try await storage.save(
                ["a1", "a2", "a3"].map { task($0, "held") } + ["b1", "b2", "b3"].map { task($0, "own") }
                    + ["c1", "c2", "c3"].map { task($0, "free") }
            )
            _ = try granted(try await storage.claim([saved[0]], owner: "w1", leaseDuration: .seconds(30)), "w1 claims held")
            _ = try granted(try await storage.claim([saved[3]], owner: "w2", leaseDuration: .seconds(30)), "w2 claims own")
            let read = try await reads.tasks(inQueues: ["held", "own", "free", "empty"], limit: 2, readingFor: "w2")
            try expect(read.tasks["held"]?.map(\.key) == ["a1"], "w1's queue: its head alone: \(read.tasks["held"] ?? [])")
            try expect(read.heldElsewhere.keys.sorted() == ["held"], "and only it is named: \(read.heldElsewhere)")
            let until = try require(read.heldElsewhere["held"], "with its lease's end")
            // The server's clock decides expiry on a shared backend: a minute either way.
            try expect(until > Date().addingTimeInterval(-60) && until < Date().addingTimeInterval(90), "the lease of 30 s ends then: \(until)")
            try expect(read.tasks["own"]?.map(\.key) == ["b1", "b2"], "the reader's own queue: the first two: \(read.tasks["own"] ?? [])")
            try expect(read.tasks["free"]?.map(\.key) == ["c1", "c2"], "a queue nobody holds: the first two: \(read.tasks["free"] ?? [])")
            try expect(read.tasks["empty"] == nil, "a queue with nothing stored gives nothing")
            try expect(read.tasks["held"]?.first == saved[0], "the head as stored: \(read.tasks["held"] ?? [])")
            try expect(read.paused.isEmpty, "no queue is paused: \(read.paused)")
            // Paused by an operator: said in the same read, also of a queue another owner holds.
            _ = try await storage.setPaused(true, queues: ["free", "held"])
            let whilePaused = try await reads.tasks(inQueues: ["held", "own", "free"], limit: 2, readingFor: "w2")
            try expect(whilePaused.paused == ["free", "held"], "the paused queues: \(whilePaused.paused)")
            try expect(whilePaused.tasks["free"]?.map(\.key) == ["c1", "c2"], "a paused queue's actions are read: \(whilePaused.tasks)")
            _ = try await storage.setPaused(false, queues: ["free", "held"])
            // Released, the queue reads as any other.
            let lease = try await storage.workers().flatMap(\.queues).filter { $0.queueName == "held" }
            try await storage.release(lease.map { TaskQueueLease(queueName: $0.queueName, epoch: $0.epoch) }, owner: "w1")
            let after = try await reads.tasks(inQueues: ["held"], limit: 2, readingFor: "w2")
            try expect(after.tasks["held"]?.map(\.key) == ["a1", "a2"] && after.heldElsewhere.isEmpty, "released: \(after.tasks)")
            try expect(read.claimed.isEmpty && after.claimed.isEmpty, "a read without a budget takes no lease")
        },
        Check("a read takes the leases of up to its budget of free queues whose head may run now, in the order given") { storage in
            guard let reads = storage as? any LeaseAwareReads else {
                throw TaskStorageConformanceFailure("the backend has no lease-aware reads (it is no LeaseAwareReads)")
            }
            let later = Date().addingTimeInterval(3_600)
            let saved = try await storage.save([
                task("a1", "held"), task("b1", "own"), task("p1", "paused"),
                NewTask(key: "l1", collection: "c", queueName: "later", payload: Data("l1".utf8), notBefore: later),
                task("r1", "restart"), task("c1", "free1"), task("c2", "free1"), task("d1", "free2"), task("e1", "free3"),
            ])
            _ = try granted(try await storage.claim([saved[0]], owner: "w1", leaseDuration: .seconds(30)), "w1 claims held")
            _ = try granted(try await storage.claim([saved[1]], owner: "w2", leaseDuration: .seconds(30)), "w2 claims own")
            _ = try await storage.setPaused(true, queues: ["paused"])
            // Failed until a restart: its head may not run.
            let restart = try granted(try await storage.claim([saved[4]], owner: "w1", leaseDuration: .seconds(30)), "w1 claims restart")
            _ = try await storage.finish([.failed(saved[4], pause: .untilRestart, epoch: restart[0])], owner: "w1")
            let names = ["held", "own", "paused", "later", "restart", "free1", "free2", "free3"]
            let read = try await reads.tasks(inQueues: names, limit: 2, readingFor: "w2", claimBudget: 2, leaseDuration: .seconds(30), now: Date())
            try expect(read.claimed.keys.sorted() == ["free1", "free2"], "the first two free queues whose head may run: \(read.claimed)")
            try expect(read.tasks["free1"]?.map(\.key) == ["c1", "c2"], "a queue whose lease the read took is read as far as the limit: \(read.tasks)")
            try expect(read.heldElsewhere.keys.sorted() == ["held"], "w1's lease still cuts its queue short: \(read.heldElsewhere)")
            try expect(read.tasks["later"]?.map(\.key) == ["l1"] && read.tasks["restart"]?.map(\.key) == ["r1"], "the others are read: \(read.tasks)")
            let epoch = try require(read.claimed["free1"], "free1's epoch")
            let holders = try await storage.workers().filter { $0.owner == "w2" }.flatMap(\.queues)
            try expect(holders.contains { $0.queueName == "free1" && $0.epoch == epoch }, "w2 holds free1 under that epoch: \(holders)")
            // Another worker's claim is refused; the head's outcome is stored under the read's epoch.
            let refused = try await storage.claim([saved[7]], owner: "w1", leaseDuration: .seconds(30))
            guard case .heldElsewhere? = refused.first else {
                throw TaskStorageConformanceFailure("w1's claim of free2 is refused while w2 holds it: \(refused)")
            }
            let report = try await storage.finish([.completed(saved[5], epoch: epoch)], owner: "w2")
            try expect(report == TaskFinishReport(), "the outcome of the head the read claimed is stored: \(report)")
            try expect(try await storage.tasks(inQueues: ["free1"]).values.flatMap { $0 }.map(\.key) == ["c2"], "c1 is done")
            // The reader's own leases are in use, another worker's are not free: w1 takes free3 alone.
            let second = try await reads.tasks(
                inQueues: ["own", "free2", "free3"], limit: 2, readingFor: "w1", claimBudget: 5, leaseDuration: .seconds(30), now: Date()
            )
            try expect(second.claimed.keys.sorted() == ["free3"], "only free3 is free: \(second.claimed)")
            try expect(second.heldElsewhere.keys.sorted() == ["free2", "own"], "and w2's queues give their head alone: \(second.heldElsewhere)")
            let third = try await reads.tasks(inQueues: ["own"], limit: 2, readingFor: "w2", claimBudget: 5, leaseDuration: .seconds(30), now: Date())
            try expect(third.claimed.isEmpty, "a lease the reader holds is not taken again: \(third.claimed)")
        },
    ]
}

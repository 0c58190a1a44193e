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
        },
    ]
}

import Foundation
import TaskBroker

extension TaskStorageConformance {
    /// The checks of what a job system keeps with each action: its earliest start, its priority
    /// and its last failure.
    static let jobChecks: [Check] = [
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
    ]
}

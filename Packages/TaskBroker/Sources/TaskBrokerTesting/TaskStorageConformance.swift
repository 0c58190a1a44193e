import Foundation
public import TaskBrokerCore

/// The behaviour every `TaskStorage` backend must show, as a list of named checks.
///
/// Run every check against a fresh, empty backend:
///
/// ```swift
/// @Test(arguments: TaskStorageConformance.checks)
/// func sqliteBackendConforms(_ check: TaskStorageConformance.Check) async throws {
///     try await check.run(on: try await TaskDatabase.sqlite(path: freshPath()).storage)
/// }
/// ```
public enum TaskStorageConformance: Sendable {
    /// One named behaviour of a backend.
    public struct Check: Sendable, CustomStringConvertible {
        /// What the check verifies.
        public let name: String
        private let body: @Sendable (any TaskStorage) async throws -> Void

        init(_ name: String, _ body: @escaping @Sendable (any TaskStorage) async throws -> Void) {
            self.name = name
            self.body = body
        }

        /// Runs the check.
        ///
        /// - Parameter storage: A fresh, empty backend.
        /// - Throws: ``TaskStorageConformanceFailure`` when the backend misbehaves, or the backend's error.
        public func run(on storage: any TaskStorage) async throws {
            try await body(storage)
        }

        public var description: String { name }
    }

    /// Every check of the suite.
    public static let checks: [Check] = queueChecks + jobChecks

    /// The checks of queues: saves, reads, claims, outcomes, pauses.
    static let queueChecks: [Check] = [
        Check("save assigns increasing positions and revisions") { storage in
            let saved = try await storage.save([task("a", "q1"), task("b", "q1"), task("c", "q2")])
            try expect(saved.map(\.key) == ["a", "b", "c"], "save returns the stored tasks in order")
            try expect(saved[0].position < saved[1].position && saved[1].position < saved[2].position, "positions increase")
            try expect(Set(saved.map(\.revision)).count == 3, "each save has its own revision")
            try expect(saved.allSatisfy { $0.attempts == 0 && $0.pause == nil }, "a new task has no attempts and no pause")
        },
        Check("tasks of a queue come back in enqueue order") { storage in
            for index in 0..<10 {
                _ = try await storage.save([task("a\(index)", "q1"), task("b\(index)", "q2")])
            }
            let q1 = try await storage.tasks(inQueue: "q1")
            try expect(q1.map(\.key) == (0..<10).map { "a\($0)" }, "q1 holds its tasks in order, got \(q1.map(\.key))")
            try expect(q1.first?.payload == Data("a0".utf8), "the payload is stored as given")
            try expect(try await storage.queueNames() == ["q1", "q2"], "queueNames lists each queue once, sorted")
        },
        Check("re-saving a key keeps its position and clears pause and attempts") { storage in
            let first = try await storage.save([task("a", "q1"), task("b", "q1")])
            try await settle(storage, [.failed(first[0], pause: .untilRestart)])
            let again = try await storage.save([task("a", "q1", payload: "new")])
            try expect(again[0].position == first[0].position, "a replaced task keeps its place")
            try expect(again[0].revision != first[0].revision, "a replaced task gets a new revision")
            let stored = try await storage.tasks(inQueue: "q1")
            try expect(stored.map(\.key) == ["a", "b"], "replacing does not duplicate")
            try expect(stored[0].pause == nil && stored[0].attempts == 0, "replacing clears pause and attempts")
            try expect(stored[0].payload == Data("new".utf8), "replacing stores the new payload")
        },
        Check("delete returns the task and removes it") { storage in
            _ = try await storage.save([task("a", "q1"), task("b", "q1")])
            let deleted = try await storage.delete(key: "a", collection: "c")
            try expect(deleted?.key == "a" && deleted?.queueName == "q1", "delete returns what it removed")
            try expect(try await storage.delete(key: "a", collection: "c") == nil, "deleting twice finds nothing")
            try expect(try await storage.tasks(inQueue: "q1").map(\.key) == ["b"], "only b is left")
        },
        Check("claim grants the stored heads of free queues") { storage in
            // A backend may also refuse a head that is gone or replaced (a shared backend must);
            // the embedded one grants it, and finishing it is then a no-op.
            let saved = try await storage.save([task("a", "q1"), task("b", "q2")])
            let epochs = try granted(try await storage.claim(saved, owner: "w", leaseDuration: .seconds(30)), "both heads are granted")
            try expect(
                try await storage.finish([.completed(saved[0], epoch: epochs[0]), .completed(saved[1], epoch: epochs[1])], owner: "w")
                    == TaskFinishReport(),
                "nothing is refused"
            )
            let again = try await storage.save([task("c", "q1")])
            _ = try granted(try await storage.claim(again, owner: "w", leaseDuration: .seconds(30)), "a finished claim frees the queue")
        },
        Check("several queues are read in one call") { storage in
            _ = try await storage.save([task("a", "q1"), task("b", "q2"), task("c", "q1"), task("d", "q3")])
            let read = try await storage.tasks(inQueues: ["q1", "q2", "empty"])
            try expect(read.keys.sorted() == ["q1", "q2"], "each queue that has actions, and no other: \(read.keys.sorted())")
            try expect(read["q1"]?.map(\.key) == ["a", "c"], "in enqueue order")
        },
        Check("queue names are listed a page at a time") { storage in
            _ = try await storage.save((0..<5).flatMap { [task("a\($0)", "q\($0)"), task("b\($0)", "q\($0)")] })
            let first = try await storage.queueNames(after: nil, limit: 2)
            try expect(first == ["q0", "q1"], "the first page, each name once: \(first)")
            let next = try await storage.queueNames(after: "q1", limit: 2)
            try expect(next == ["q2", "q3"], "the page after q1: \(next)")
            let last = try await storage.queueNames(after: "q3", limit: 2)
            try expect(last == ["q4"], "the last page: \(last)")
            try expect(try await storage.queueNames(after: "q4", limit: 2).isEmpty, "nothing after the last name")
        },
        Check("a limited read returns the first actions of each queue, in enqueue order") { storage in
            let saved = try await storage.save((0..<5).flatMap { [task("a\($0)", "q1"), task("b\($0)", "q2")] } + [task("c", "q3")])
            // A completed head is gone from the read: the next actions take its place.
            let epochs = try granted(try await storage.claim([saved[0]], owner: "w", leaseDuration: .seconds(30)), "a0 runs")
            try await storage.finish([.completed(saved[0], epoch: epochs[0])], owner: "w")
            _ = try await storage.save([task("b1", "q2", payload: "again")])
            let read = try await storage.tasks(inQueues: ["q1", "q2", "q3", "empty"], limit: 2)
            try expect(read.keys.sorted() == ["q1", "q2", "q3"], "each queue that has actions, and no other: \(read.keys.sorted())")
            try expect(read["q1"]?.map(\.key) == ["a1", "a2"], "the first two live actions: \(read["q1"]?.map(\.key) ?? [])")
            try expect(read["q2"]?.map(\.key) == ["b0", "b1"], "a replaced action keeps its place: \(read["q2"]?.map(\.key) ?? [])")
            try expect(read["q2"]?[1].payload == Data("again".utf8), "as last saved")
            try expect(read["q3"]?.map(\.key) == ["c"], "a shorter queue is read whole")
            let after = try await storage.tasks(
                inQueues: ["q1", "q2", "q3"], after: ["q1": read["q1"]?.last?.position ?? 0, "q3": saved[10].position], limit: 2
            )
            try expect(after["q1"]?.map(\.key) == ["a3", "a4"], "read on after a position: \(after["q1"]?.map(\.key) ?? [])")
            try expect(after["q2"]?.map(\.key) == ["b0", "b1"], "a queue without a position is read from its start")
            try expect(after["q3"] == nil, "nothing after the last action: \(after.keys.sorted())")
        },
        Check("completing deletes only the revision that ran") { storage in
            let saved = try await storage.save([task("a", "q1"), task("b", "q2")])
            let epochs = try granted(try await storage.claim(saved, owner: "w", leaseDuration: .seconds(30)), "both run")
            _ = try await storage.save([task("b", "q2", payload: "again")])
            let report = try await storage.finish([.completed(saved[0], epoch: epochs[0]), .completed(saved[1], epoch: epochs[1])], owner: "w")
            try expect(report.fenced.isEmpty, "the claimant still holds both queues: nothing is refused")
            try expect(report.outdated.isSubset(of: ["q2"]), "only b's outcome may be reported outdated: \(report)")
            try expect(try await storage.queueNames() == ["q2"], "a is gone")
            let left = try await storage.tasks(inQueue: "q2")
            try expect(left.map(\.key) == ["b"] && left[0].payload == Data("again".utf8), "the re-saved b stays")
        },
        Check("a completed task is gone for every read, and saving its key again enqueues it at the end") { storage in
            let saved = try await storage.save([task("a", "q1"), task("b", "q1"), task("c", "q2")])
            try await settle(storage, [.completed(saved[0]), .completed(saved[2])])
            try expect(try await storage.queueNames() == ["q1"], "a queue whose tasks all completed is not listed")
            try expect(try await storage.snapshot().map(\.pending) == [1], "snapshot counts only what is left")
            try expect(try await storage.delete(key: "a", collection: "c") == nil, "deleting a completed task finds nothing")
            let again = try await storage.save([task("a", "q1", payload: "again")])
            try expect(again[0].position > saved[1].position, "a completed key saved again goes to the end")
            let q1 = try await storage.tasks(inQueue: "q1")
            try expect(q1.map(\.key) == ["b", "a"], "the queue runs b, then the new a; got \(q1.map(\.key))")
            try expect(q1.last?.payload == Data("again".utf8) && q1.last?.attempts == 0, "the new a is the new version")
            try expect(try await storage.purge(queue: "q1") == 2, "purge counts the tasks it deleted")
        },
        Check("failing counts the attempt and stores the pause") { storage in
            let saved = try await storage.save([task("a", "q1"), task("b", "q2"), task("c", "q3")])
            let date = Date(timeIntervalSince1970: 1_900_000_000.25)
            try await settle(storage, [.failed(saved[0], pause: .until(date)), .failed(saved[1], pause: .untilRestart), .failed(saved[2], pause: nil)])
            let a = try await storage.tasks(inQueue: "q1")[0]
            let b = try await storage.tasks(inQueue: "q2")[0]
            let c = try await storage.tasks(inQueue: "q3")[0]
            guard case .until(let stored)? = a.pause else { throw TaskStorageConformanceFailure("a timed pause is stored") }
            try expect(abs(stored.timeIntervalSince(date)) < 0.001, "the retry date survives: \(stored)")
            try expect(a.attempts == 1 && b.attempts == 1 && c.attempts == 1, "each failure counts")
            try expect(b.pause == .untilRestart && c.pause == nil, "pauses are stored as given")
            try await settle(storage, [.failed(c, pause: nil)])
            try expect(try await storage.tasks(inQueue: "q3")[0].attempts == 2, "attempts add up")
        },
        Check("resume clears the pauses of the named queues only") { storage in
            let saved = try await storage.save([task("a", "q1"), task("b", "q2")])
            try await settle(storage, [.failed(saved[0], pause: .untilRestart), .failed(saved[1], pause: .untilRestart)])
            let resumed = try await storage.resume(queues: ["q1"])
            try expect(resumed.map(\.key) == ["a"], "resume returns what it resumed")
            try expect(try await storage.tasks(inQueue: "q1")[0].pause == nil, "q1 runs again")
            try expect(try await storage.tasks(inQueue: "q2")[0].pause == .untilRestart, "q2 stays paused")
        },
        Check("purge deletes one queue") { storage in
            _ = try await storage.save([task("a", "q1"), task("b", "q1"), task("c", "q2")])
            try expect(try await storage.purge(queue: "q1") == 2, "purge counts what it deleted")
            try expect(try await storage.queueNames() == ["q2"], "only q2 is left")
        },
        Check("snapshot reports pending, pause and attempts per queue") { storage in
            let saved = try await storage.save([task("a", "q1"), task("b", "q1"), task("c", "q2")])
            try await settle(storage, [.failed(saved[0], pause: .untilRestart)])
            let snapshot = try await storage.snapshot()
            try expect(snapshot.map(\.name) == ["q1", "q2"], "one snapshot per queue, sorted")
            try expect(snapshot[0].pending == 2 && snapshot[0].pause == .untilRestart && snapshot[0].attempts == 1, "\(snapshot[0])")
            try expect(snapshot[1].pending == 1 && snapshot[1].pause == nil && snapshot[1].attempts == 0, "\(snapshot[1])")
        },
    ]

    /// The checks a backend shared by several processes must pass too (leases, fencing, the change
    /// feed). Run them against a fresh backend whose lease (`TaskStorage.leaseDuration`) is short,
    /// a few seconds: two checks wait for a lease to expire, and the others need a lease to last
    /// through a few claims and finishes, and each of the backend's own transactions to survive a
    /// stall of its client (TaskBroker's PostgreSQL backend has the server end one idle for half
    /// the lease). TaskBroker's own tests use 6 s; 1 s and 3 s were too short on a loaded 2-core
    /// machine.
    public static let sharedChecks: [Check] = sharedQueueChecks + sharedJobChecks

    /// The epochs of claims that must all be granted.
    static func granted(_ results: [TaskClaimResult], _ message: @autoclosure () -> String) throws -> [Int64] {
        let epochs = results.compactMap(\.grantedEpoch)
        try expect(epochs.count == results.count, "\(message()): \(results)")
        return epochs
    }

    /// Claims `head` for `owner` until the lease another worker holds on its queue expires and
    /// the claim is granted (at most ~200 tries, each after the time the refusal names); returns
    /// the epoch it was granted under.
    @discardableResult
    static func takeOver(_ head: StoredTask, by owner: String, in storage: any TaskStorage) async throws -> Int64 {
        for _ in 0..<200 {
            let result = try await storage.claim([head], owner: owner, leaseDuration: .seconds(30))
            if result.count == 1, let epoch = result[0].grantedEpoch { return epoch }
            guard case .heldElsewhere(let until)? = result.first else {
                throw TaskStorageConformanceFailure("\(owner)'s claim is held off, not refused: \(result)")
            }
            try await Task.sleep(for: .milliseconds(max(10, min(200, Int(until.timeIntervalSinceNow * 1000)))))
        }
        throw TaskStorageConformanceFailure("\(owner) takes the queue over after the lease")
    }

    /// A renewal as a broker makes it: one that gives up (a shared backend's renewal does after a
    /// quarter of the lease, which a loaded machine can take) is tried again, up to five times.
    static func renewing<T>(_ renew: () async throws -> T) async throws -> T {
        var failures = 0
        while true {
            do {
                return try await renew()
            } catch let error as TaskBrokerError where error.code == .storageFailed && failures < 4 {
                failures += 1
            }
        }
    }

    static func renewing(_ leases: [TaskQueueLease], owner: String, in storage: any TaskStorage) async throws -> [TaskQueueLease] {
        try await renewing { try await storage.renew(leases, owner: owner, leaseDuration: .seconds(30)) }
    }

    /// What a broker does with outcomes: claims the actions, then stores what became of them.
    static func settle(_ storage: any TaskStorage, _ outcomes: [TaskOutcome]) async throws {
        let heads = outcomes.map(\.task)
        let epochs = try granted(try await storage.claim(heads, owner: "w", leaseDuration: .seconds(30)), "the heads are granted")
        let report = try await storage.finish(zip(outcomes, epochs).map { $0.under(epoch: $1) }, owner: "w")
        try expect(report == TaskFinishReport(), "the claimant's outcomes are stored: \(report)")
    }

    static func task(_ key: String, _ queue: String, payload: String? = nil) -> NewTask {
        NewTask(key: key, collection: "c", queueName: queue, payload: Data((payload ?? key).utf8))
    }

    static func expect(_ condition: Bool, _ message: @autoclosure () -> String) throws {
        if !condition { throw TaskStorageConformanceFailure(message()) }
    }
}

/// A backend failed a ``TaskStorageConformance`` check.
public struct TaskStorageConformanceFailure: Error, Sendable, CustomStringConvertible {
    /// What the backend got wrong.
    public let description: String

    /// Creates a failure.
    ///
    /// - Parameter description: What the backend got wrong.
    public init(_ description: String) {
        self.description = description
    }
}

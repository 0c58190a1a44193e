import Foundation
import TaskBrokerCore

extension TaskStorageConformance {
    /// The checks of a backend that holds batches of plain parallel actions under a transaction
    /// (`HeldParallelTaskStorage`): run each against a fresh, empty backend, as ``checks``.
    public static let heldParallelChecks: [Check] = [
        Check("a held batch keeps its actions from every other claim; its settlement stores its outcomes and leaves the rest as ordinary claims") { storage in
            let held = try heldStorage(storage)
            _ = try await held.saveParallel(["a", "b", "c", "d", "e"].map { task($0, "p") })
            let now = Date(timeIntervalSince1970: 2_000_000_000)
            let batch = try await held.claimParallelHeld(.prefix("p"), limit: 4, owner: "w1", leaseDuration: .seconds(30), now: now)
            let claims = try require(batch, "a batch is held").claims
            try expect(claims.map(\.task.key) == ["a", "b", "c", "d"], "the first four, in the claim order: \(claims.map(\.task.key))")
            let others = try await held.claimParallel(.prefix("p"), limit: 10, owner: "w2", leaseDuration: .seconds(30), now: now)
            try expect(others.map(\.task.key) == ["e"], "another owner's claim skips the held ones: \(others.map(\.task.key))")
            let otherBatch = try await held.claimParallelHeld(.prefix("p"), limit: 10, owner: "w2", leaseDuration: .seconds(30), now: now)
            try expect(otherBatch?.claims.isEmpty ?? true, "and so does another held claim: \(otherBatch?.claims.map(\.task.key) ?? [])")
            let failure = TaskFailure(reason: "server said 503", failedAt: now)
            var failed = claims[1]
            failed.task.lastFailure = failure
            var deadLettered = claims[2]
            deadLettered.task.lastFailure = failure
            let settlement = try await require(batch, "held").settle([
                TaskParallelOutcome(claim: claims[0], result: .completed),
                TaskParallelOutcome(claim: failed, result: .failed(retryAt: now.addingTimeInterval(100))),
                TaskParallelOutcome(claim: deadLettered, result: .deadLettered),
            ])
            try expect(settlement == .stored, "settled: \(settlement)")
            try expect(try await held.lookupParallel(key: "a", collection: "c") == nil, "the completed one is gone")
            let retried = try await held.claimParallel(.prefix("p"), limit: 10, owner: "w2", leaseDuration: .seconds(30), now: now.addingTimeInterval(100))
            try expect(retried.map(\.task.key) == ["b"] && retried[0].task.attempts == 1 && retried[0].task.lastFailure == failure,
                       "the failed one waits for its retry time, with its attempt and failure: \(retried)")
            try expect(try await held.parallelDeadLetters(queueName: nil).map(\.key) == ["c"], "c is a dead letter")
            try expect(try await renewing([claims[3]], owner: "w1", in: held).isEmpty, "d is an ordinary claim of w1, with the batch's token")
            try expect(try await held.finishParallel([TaskParallelOutcome(claim: claims[3], result: .completed)], owner: "w1").isEmpty,
                       "and its outcome is stored as one")
            try expect(try await held.lookupParallel(key: "d", collection: "c") == nil, "d is done")
        },
        Check("a released batch's actions are ready at once; a batch that found nothing holds nothing") { storage in
            let held = try heldStorage(storage)
            _ = try await held.saveParallel([task("a", "p"), task("b", "p")])
            let batch = try await held.claimParallelHeld(.prefix("p"), limit: 5, owner: "w1", leaseDuration: .seconds(30), now: Date())
            try expect(try require(batch, "a batch is held").claims.count == 2, "both are held")
            await batch?.release()
            let claimed = try await held.claimParallel(.prefix("p"), limit: 5, owner: "w2", leaseDuration: .seconds(30), now: Date())
            try expect(claimed.map(\.task.key) == ["a", "b"], "released, both are claimed at once: \(claimed.map(\.task.key))")
            let empty = try await held.claimParallelHeld(.prefix("p"), limit: 5, owner: "w1", leaseDuration: .seconds(30), now: Date())
            try expect(empty?.claims.isEmpty ?? true, "nothing is left to hold")
            try expect(await empty?.settle([]) ?? .stored == .stored, "an empty batch settles as stored")
        },
    ]

    static func heldStorage(_ storage: any TaskStorage) throws -> any HeldParallelTaskStorage {
        guard let held = storage as? any HeldParallelTaskStorage else {
            throw TaskStorageConformanceFailure("the backend holds no batches (it is no HeldParallelTaskStorage)")
        }
        return held
    }

    static func require<T>(_ value: T?, _ message: String) throws -> T {
        guard let value else { throw TaskStorageConformanceFailure(message) }
        return value
    }
}

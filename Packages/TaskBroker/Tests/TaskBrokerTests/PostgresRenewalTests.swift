// PostgreSQL only: not compiled in a build without TaskBrokerPostgres (the AddressSanitizer run).
#if canImport(TaskBrokerPostgres)
import Foundation
import TaskBroker
@testable import TaskBrokerPostgres
import Testing

/// A renewal names each lease with the epoch its claim was granted, and a finish may commit while
/// it runs. A finish that releases a lease (its queue is empty, or let go for another worker of the
/// pool) has it extended again by that renewal: same owner, same epoch. The renewal does not report
/// it lost, and the broker, which knows it let that lease go (`BrokerStateMachineRenewalTests`),
/// releases it again: other workers get the queue at once, not after a whole lease. Each test runs
/// the finish before the renewal, as it happens when it commits while the renewal runs.
@Suite(.timeLimit(.minutes(3)))
struct PostgresRenewalTests {
    @Test func aLeaseReleasedWhileTheRenewalRunsIsFreeOnceTheBrokerReleasesItAgain() async throws {
        let (storage, saved, lease) = try await Self.claimedQueue(["a"])
        let report = try await storage.finish([.completed(saved[0], epoch: lease.epoch)], owner: "w")
        #expect(report == TaskFinishReport(), "a is stored and the empty queue's lease released")
        #expect(try await storage.renew([lease], owner: "w", leaseDuration: .seconds(30)).isEmpty, "nothing lost")
        let next = try await storage.save([NewTask(key: "b", collection: "c", queueName: "q", payload: Data("b".utf8))])
        guard case .heldElsewhere = try await storage.claim(next, owner: "v", leaseDuration: .seconds(30)).first else {
            Issue.record("the renewal extended the released lease: another worker is refused until the broker releases it again")
            return
        }
        try await storage.release([lease], owner: "w")
        let claimed = try await storage.claim(next, owner: "v", leaseDuration: .seconds(30))
        #expect(
            claimed.first?.grantedEpoch.map { $0 > lease.epoch } == true,
            "another worker claims the queue now, under a newer epoch: \(claimed)"
        )
    }

    /// The finish kept the lease for the queue's next head: the renewal extends it and keeps it.
    @Test func aLeaseKeptForTheNextHeadWhileTheRenewalRunsStaysHeld() async throws {
        let (storage, saved, lease) = try await Self.claimedQueue(["a", "b"])
        let report = try await storage.finish(
            [.completed(saved[0], epoch: lease.epoch)], claimingNext: ["q": saved[1]], owner: "w", leaseDuration: .seconds(30)
        )
        #expect(report.continued == ["q"], "the finish claimed b")
        #expect(try await storage.renew([lease], owner: "w", leaseDuration: .seconds(30)).isEmpty, "nothing lost")
        guard case .heldElsewhere = try await storage.claim([saved[1]], owner: "v", leaseDuration: .seconds(30)).first else {
            Issue.record("another worker was granted a queue whose lease w holds for b")
            return
        }
        // b runs on the kept lease, under a's epoch: its outcome is stored.
        #expect(try await storage.finish([.completed(saved[1], epoch: lease.epoch)], owner: "w") == TaskFinishReport())
    }

    /// A storage whose owner "w" holds the lease of queue "q", with these actions in it.
    private static func claimedQueue(_ keys: [String]) async throws -> (PostgresTaskStorage, [StoredTask], TaskQueueLease) {
        let store = try TestStore(.postgres)
        let database = try await TaskDatabase.postgres(configuration: try store.postgresConfiguration(leaseDuration: .seconds(30)))
        let storage = try #require(database.storage as? PostgresTaskStorage)
        let saved = try await storage.save(keys.map { NewTask(key: $0, collection: "c", queueName: "q", payload: Data($0.utf8)) })
        let epoch = try #require(try await storage.claim([saved[0]], owner: "w", leaseDuration: .seconds(30)).first?.grantedEpoch)
        return (storage, saved, TaskQueueLease(queueName: "q", epoch: epoch))
    }
}
#endif

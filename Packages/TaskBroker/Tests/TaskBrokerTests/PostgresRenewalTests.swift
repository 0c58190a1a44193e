// PostgreSQL only: not compiled in a build without TaskBrokerPostgres (the AddressSanitizer run).
#if canImport(TaskBrokerPostgres)
import Foundation
import TaskBroker
@testable import TaskBrokerPostgres
import Testing

/// The lease renewal reads the leases its worker holds, then extends them in one statement. A
/// finish that commits in between and releases a lease (its queue is empty, or let go for another
/// worker of the pool) used to have it extended again by that statement: same owner, same epoch.
/// Other workers were then refused the queue for a whole lease. Each test runs the finish between
/// the two steps, as it happens when it commits while the renewal runs.
@Suite(.timeLimit(.minutes(3)))
struct PostgresRenewalTests {
    @Test func aLeaseReleasedWhileTheRenewalRunsStaysReleased() async throws {
        let (storage, saved) = try await Self.claimedQueue(["a"])
        let held = storage.heldLeases(["q"], owner: "w")
        #expect(held.map(\.queueName) == ["q"])
        let report = try await storage.finish([.completed(saved[0])], owner: "w")
        #expect(report == TaskFinishReport(), "a is stored and the empty queue's lease released")
        #expect(try await storage.renew(held, owner: "w").isEmpty, "nothing lost")
        let next = try await storage.save([NewTask(key: "b", collection: "c", queueName: "q", payload: Data("b".utf8))])
        #expect(
            try await storage.claim(next, owner: "v", leaseDuration: .seconds(30)) == [.granted],
            "another worker claims the queue now, not once the renewed 30 s lease expires"
        )
    }

    /// The finish kept the lease for the queue's next head: the renewal extends it and keeps it.
    @Test func aLeaseKeptForTheNextHeadWhileTheRenewalRunsStaysHeld() async throws {
        let (storage, saved) = try await Self.claimedQueue(["a", "b"])
        let held = storage.heldLeases(["q"], owner: "w")
        let report = try await storage.finish([.completed(saved[0])], claimingNext: ["q": saved[1]], owner: "w", leaseDuration: .seconds(30))
        #expect(report.continued == ["q"], "the finish claimed b")
        #expect(try await storage.renew(held, owner: "w").isEmpty, "nothing lost")
        guard case .heldElsewhere = try await storage.claim([saved[1]], owner: "v", leaseDuration: .seconds(30)).first else {
            Issue.record("another worker was granted a queue whose lease w holds for b")
            return
        }
        #expect(try await storage.claim([saved[1]], owner: "w", leaseDuration: .seconds(30)) == [.granted])
    }

    /// A storage whose owner "w" holds the lease of queue "q", with these actions in it.
    private static func claimedQueue(_ keys: [String]) async throws -> (PostgresTaskStorage, [StoredTask]) {
        let store = try TestStore(.postgres)
        let database = try await TaskDatabase.postgres(configuration: try store.postgresConfiguration(leaseDuration: .seconds(30)))
        let storage = try #require(database.storage as? PostgresTaskStorage)
        let saved = try await storage.save(keys.map { NewTask(key: $0, collection: "c", queueName: "q", payload: Data($0.utf8)) })
        #expect(try await storage.claim([saved[0]], owner: "w", leaseDuration: .seconds(30)) == [.granted])
        return (storage, saved)
    }
}
#endif

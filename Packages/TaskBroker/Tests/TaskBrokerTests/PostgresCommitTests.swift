// PostgreSQL only: not compiled in a build without TaskBrokerPostgres (the AddressSanitizer run).
#if canImport(TaskBrokerPostgres)
import Foundation
import PostgresNIO
import TaskBroker
@testable import TaskBrokerPostgres
import Testing

/// What claims, finishes and renewals make of PostgreSQL's answers.
///
/// PostgreSQL commits a statement sent on its own (an implicit transaction) only after it has
/// answered that the statement completed, and postgres-nio reports the statement done on that
/// answer. A commit that then fails (here: a deferred constraint trigger that raises at commit; in
/// production: a full notification queue, or a server that stops before the commit reaches disk)
/// must not be taken for a stored outcome or a granted claim. And a claim that skips a locked
/// lease row must not wait for the claimant's own lease.
@Suite(.timeLimit(.minutes(3)))
struct PostgresCommitTests {
    @Test func aFinishWhoseCommitFailsThrowsAndStoresNothing() async throws {
        let (storage, admin, schema) = try await Self.storage()
        let saved = try await storage.save([NewTask(key: "poison", collection: "c", queueName: "q", payload: Data())])
        let epochs = try await storage.claimGranted(saved, owner: "w")
        try await Self.failCommitsThatDelete("poison", admin: admin, schema: schema)
        await #expect(throws: TaskBrokerError.self) {
            try await storage.finish([.completed(saved[0], epoch: epochs[0])], owner: "w")
        }
        #expect(try await storage.tasks(inQueue: "q").map(\.key) == ["poison"], "the action is still stored")
    }

    @Test func aClaimWhoseCommitFailsThrowsAndLeavesTheQueueFree() async throws {
        let (storage, admin, schema) = try await Self.storage()
        let saved = try await storage.save([NewTask(key: "a", collection: "c", queueName: "q", payload: Data())])
        try await Self.failCommits(of: "UPDATE", on: "queue", when: "NEW.owner = 'doomed'", admin: admin, schema: schema)
        await #expect(throws: TaskBrokerError.self) {
            try await storage.claim(saved, owner: "doomed", leaseDuration: .seconds(30))
        }
        _ = try await storage.claimGranted(saved, owner: "w")  // no lease was taken: another worker claims the queue at once
    }

    @Test func aRenewalWhoseCommitFailsThrows() async throws {
        let (storage, admin, schema) = try await Self.storage()
        let saved = try await storage.save([NewTask(key: "a", collection: "c", queueName: "q", payload: Data())])
        let epochs = try await storage.claimGranted(saved, owner: "w")
        try await Self.failCommits(of: "UPDATE", on: "queue", when: "NEW.owner = 'w'", admin: admin, schema: schema)
        await #expect(throws: TaskBrokerError.self) {
            try await storage.renew([TaskQueueLease(queueName: "q", epoch: epochs[0])], owner: "w", leaseDuration: .seconds(30))
        }
    }

    /// A worker claims a queue whose lease it holds itself while another transaction has the
    /// queue's row locked (here an administrator's; in a worker: its own renewal or release under
    /// way). It is told to look again soon, not when its own lease ends: it waited up to a whole
    /// lease for itself, and no other worker could take the queue meanwhile.
    @Test func aClaimOfItsOwnLeaseWhoseRowIsLockedIsTriedAgainSoon() async throws {
        let (storage, admin, schema) = try await Self.storage()
        let saved = try await storage.save([NewTask(key: "a", collection: "c", queueName: "q", payload: Data())])
        _ = try await storage.claimGranted(saved, owner: "w")
        let answer = try await admin.write { tx -> TaskClaimResult? in
            try await tx.execute(PostgresQuery(unsafeSQL: "SELECT 1 FROM \"\(schema)\".queue WHERE name = 'q' FOR NO KEY UPDATE"))
            return try await storage.claim(saved, owner: "w", leaseDuration: .seconds(30)).first
        }
        guard case .heldElsewhere(let until)? = answer else {
            Issue.record("the claim answered \(String(describing: answer)) while the row was locked")
            return
        }
        #expect(until.timeIntervalSinceNow < 1, "look again soon, not in \(until.timeIntervalSinceNow) s")
    }

    /// An action saved again while it ran: its completion is outdated and stores nothing. With a
    /// next head claimed, the finish kept the lease all the same, unmarked: the broker did not know
    /// it held it, and other workers waited for it to expire. Without one, it let the lease go
    /// without a word: a worker told to wait for the lease waited until it would have expired.
    /// Now the lease is let go and the queue announced, in both cases.
    @Test(arguments: [true, false]) func anOutdatedOutcomeLetsItsLeaseGoAndSaysSo(claimingNext: Bool) async throws {
        let (storage, admin, _) = try await Self.storage()
        let other = try #require(admin.storage as? PostgresTaskStorage)
        let saved = try await storage.save(["a", "b"].map { NewTask(key: $0, collection: "c", queueName: "q", payload: Data()) })
        let epochs = try await storage.claimGranted([saved[0]], owner: "w")
        let resaved = try await storage.save([NewTask(key: "a", collection: "c", queueName: "q", payload: Data("2".utf8))])
        let answer = try await other.claim(resaved, owner: "x", leaseDuration: .seconds(30))
        guard case .heldElsewhere? = answer.first else {
            Issue.record("the other worker's claim answered \(answer) while w held the lease")
            return
        }
        let feed = try #require(try await other.changes())
        // Skips what the feed hears before the finish (the save of a, a first catch-up), up to a change committed now.
        _ = try await other.save([NewTask(key: "mark", collection: "c", queueName: "mark", payload: Data())])
        var heard = feed.makeAsyncIterator()
        while let batch = await heard.next(), !batch.contains(.queuesChanged(["mark"])) {}

        let report = try await storage.finish(
            [.completed(saved[0], epoch: epochs[0])], claimingNext: claimingNext ? ["q": saved[1]] : [:], owner: "w", leaseDuration: .seconds(30)
        )
        #expect(report == TaskFinishReport(outdated: ["q"]), "nothing stored, nothing continued")
        while let batch = await heard.next(), !batch.contains(.queuesChanged(["q"])) {}
        _ = try await other.claimGranted(resaved, owner: "x")  // the waiting worker takes the queue at once
    }

    /// A storage on a fresh schema, and an administrator's database on the same schema.
    private static func storage() async throws -> (PostgresTaskStorage, TaskDatabase, String) {
        let store = try TestStore(.postgres)
        let database = try await TaskDatabase.postgres(configuration: try store.postgresConfiguration(leaseDuration: .seconds(30)))
        let storage = try #require(database.storage as? PostgresTaskStorage)
        return (storage, try await store.open(), store.schema)
    }

    /// Makes every commit fail that deletes the action `key`.
    private static func failCommitsThatDelete(_ key: String, admin: TaskDatabase, schema: String) async throws {
        try await failCommits(of: "DELETE", on: "action", when: "OLD.key = '\(key)'", admin: admin, schema: schema)
    }

    /// Makes every commit fail that made such a change: a deferred constraint trigger raises at commit.
    private static func failCommits(of event: String, on table: String, when condition: String, admin: TaskDatabase, schema: String) async throws {
        try await admin.write { tx in
            try await tx.execute(PostgresQuery(unsafeSQL: """
                CREATE FUNCTION "\(schema)".refuse_commit() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN RAISE EXCEPTION 'commit refused by the test'; END $$
                """))
            try await tx.execute(PostgresQuery(unsafeSQL: """
                CREATE CONSTRAINT TRIGGER refuse_commit AFTER \(event) ON "\(schema)".\(table)
                DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (\(condition))
                EXECUTE FUNCTION "\(schema)".refuse_commit()
                """))
        }
    }
}
#endif

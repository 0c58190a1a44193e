import Foundation
import Synchronization
@testable import TaskBrokerCore
@testable import TaskBrokerSQLite
import TaskBroker
import Testing

/// Changes made through an SQLite `TaskDatabase` reach its brokers in commit order.
@Suite(.timeLimit(.minutes(3)))
struct PublicationOrderTests {
    /// Concurrent saves, each its own transaction (half through `save`, half through `write`):
    /// the brokers' notifications name them in the order they were committed (their revisions,
    /// numbered in commit order by the writer).
    ///
    /// Each save used to be announced after `save` returned, from whichever thread resumed the
    /// caller: two saves committed one after the other could be announced the other way round.
    /// Harmless for two saves (a broker keeps the newer revision), not for a purge committed before
    /// a save but announced after it: the broker dropped the saved action, which then stayed stored
    /// and unrun until the queue was read again (a restart). The same with a save announced after
    /// the delete of that very revision: the broker ran the cancelled action.
    @Test func concurrentSavesAreAnnouncedInCommitOrder() async throws {
        let directory = try TemporaryDirectory()
        let database = try await TaskDatabase.sqlite(path: directory.path("tasks.sqlite"))
        let announced = Mutex<[Int64]>([])
        let listener = database.hub.notifier.add { changes in
            let revisions = changes.compactMap { change -> Int64? in
                if case .saved(let task) = change { return task.revision }
                return nil
            }
            announced.withLock { $0 += revisions }
        }
        defer { database.hub.notifier.remove(listener) }
        let saves = 2_000
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<saves {
                let action = TestAction(key: "k\(index)", queueName: "q\(index % 8)")
                group.addTask {
                    if index.isMultiple(of: 2) {
                        try await database.save(action)
                    } else {
                        try await database.write { try $0.save(action) }
                    }
                }
            }
            try await group.waitForAll()
        }
        let order = announced.withLock { $0 }
        #expect(order.count == saves)
        let inversions = zip(order, order.dropFirst()).filter { $0 > $1 }.count
        #expect(inversions == 0, "\(inversions) save(s) announced before one committed earlier")
    }
}

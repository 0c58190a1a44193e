import Foundation
import Synchronization
import TaskBroker

/// The schedule a fresh demo runs beside its workload: `digest`, every second, saving one
/// digest upload per tick (a `TaskScheduler`); it stops once it has enqueued ``ticks`` ticks.
final class ShowcaseSchedule: Sendable {
    /// The schedule's name.
    static let name = "digest"
    /// The user (and so the queue) of the digest uploads.
    static let user = "digest"
    /// How many ticks the demo enqueues.
    static let ticks = 2

    private let start: ContinuousClock.Instant
    private let enqueued = Mutex<[(key: String, at: Duration)]>([])

    init(start: ContinuousClock.Instant) {
        self.start = start
    }

    /// The digest uploads' queue.
    static var queue: String { QueueNames.live(user) }

    /// Runs the scheduler until it has enqueued ``ticks`` ticks (or the task is cancelled).
    func run(in store: Store) async {
        do {
            let schedule = try TaskSchedule(Self.name, .every(.seconds(1)), missedTicks: .skip) { tick in
                UploadAction(key: "showcase-\(tick.key)", user: Self.user, file: "DIGEST.txt", bytes: 20_000)
            }
            let scheduler = try TaskScheduler(database: store.database, schedules: [schedule])
            let events = scheduler.events
            let start = self.start
            await withTaskGroup(of: Void.self) { group in
                group.addTask { try? await scheduler.run() }
                group.addTask {
                    for await event in events {
                        guard case .enqueued(let tick, _) = event else { continue }
                        let count = self.enqueued.withLock { ticks in
                            ticks.append((tick.key, ContinuousClock.now - start))
                            return ticks.count
                        }
                        if count == Self.ticks { return }
                    }
                }
                await group.next()
                group.cancelAll()
            }
        } catch {
            say("note: the demo's schedule did not run: \(error)")
        }
    }

    /// The summary's row: the ticks enqueued, when, and whether their uploads ran.
    func row(for counts: RunProgress.Counts) -> (String, String) {
        let ticks = enqueued.withLock { $0 }
        let times = ticks.map { String(format: "+%.2f s", $0.at.seconds) }.joined(separator: " and ")
        let ran = counts.firstStarts[Self.queue] != nil ? "; their uploads ran in \(Self.queue)" : ""
        return ("schedule", "\(Self.name) every 1 s: \(ticks.count) tick(s) enqueued once each, at \(times)\(ran) (`queuekit schedules`)")
    }
}

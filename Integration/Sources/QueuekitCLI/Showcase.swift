import Foundation
import TaskBroker

/// What a fresh demo shows beside its workload: one upload saved to start two seconds later
/// (`save(_:notBefore:)`), and one user's queue that an operator pauses for the run's first
/// second (`pauseQueues` / `resumeQueues`) while the other queues run.
struct Showcase: Sendable {
    /// The user of the upload that runs later.
    static let laterUser = "later"
    /// How long after its save the later upload may start.
    static let delay: Duration = .seconds(2)
    /// How long the paused queue stays paused.
    static let pause: Duration = .seconds(1)

    /// The queue paused for ``pause``.
    let pausedQueue: String
    /// When the later upload was saved and the queue paused.
    let start: ContinuousClock.Instant

    /// The later upload's queue.
    static var laterQueue: String { QueueNames.live(laterUser) }

    /// Pauses the first user's queue and saves the later upload.
    static func begin(in store: Store, workload: Workload) async throws -> Showcase {
        let paused = workload.action(at: 0).queueName
        try await store.run("pause \(paused)") { try await store.database.pauseQueues([paused]) }
        let upload = UploadAction(key: "showcase-later-\(workload.seed)", user: laterUser, file: "IMG_LATER.jpg", bytes: 2_000_000)
        let start = ContinuousClock.now
        let notBefore = Date(timeIntervalSinceNow: delay.seconds)
        try await store.run("save the later upload") { try await store.database.save(upload, notBefore: notBefore) }
        return Showcase(pausedQueue: paused, start: start)
    }

    /// Resumes the paused queue once ``pause`` has passed (at once if the calling task is
    /// cancelled, so that an interrupted demo leaves nothing paused).
    func resumeAfterPause(in store: Store) async throws {
        try? await Task.sleep(until: start + Self.pause, clock: .continuous)
        try await store.run("resume \(pausedQueue)") { try await store.database.resumeQueues([pausedQueue]) }
    }

    /// The summary's rows: when the later upload and the paused queue's first upload started.
    func rows(for counts: RunProgress.Counts) -> [(String, String)] {
        func at(_ queue: String) -> String {
            counts.firstStarts[queue].map { String(format: "started at +%.2f s", ($0 - start).seconds) } ?? "not started in this run"
        }
        return [
            ("run later", "\(Self.laterQueue): saved at +0.00 s to start at +\(String(format: "%.2f", Self.delay.seconds)) s; \(at(Self.laterQueue))"),
            ("pause", "\(pausedQueue) paused by an operator until +\(String(format: "%.2f", Self.pause.seconds)) s; its first upload \(at(pausedQueue))"),
        ]
    }
}

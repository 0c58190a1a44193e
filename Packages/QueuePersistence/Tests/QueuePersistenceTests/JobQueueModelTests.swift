import AsyncPrimitivesTesting
import Foundation
import PropertyBased
import QueueCore
import QueueCoreTesting
import QueuePersistence
import Synchronization
import Testing

/// A `JobQueue` with each persister against a model (an array of ids): random sequences of add,
/// remove, cancel, processing (start, every job processed, stop), `retry(_:)` of a new job (put
/// first) and restart (a new persister and queue on the same storage). After every step the queue holds what the model
/// holds, in order; after a restart and at the end, so does the storage. A failing case prints
/// its steps and a seed to replay it with `.fixedSeed(…)`.
@Suite(.timeLimit(.minutes(2)))
struct JobQueueModelTests {
    enum Kind: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case file
        case sqlite

        var testDescription: String { rawValue }

        /// A new persister of this kind on the storage in `directory`.
        func persister(_ queueName: String, in directory: TemporaryDirectory) throws -> AnyJobPersister<CuteJob> {
            switch self {
            case .file:
                AnyJobPersister(FileBasedPersister(handling: CuteJob.self, queueName: queueName, directory: directory.url))
            case .sqlite:
                AnyJobPersister(try SQLiteJobPersister(handling: CuteJob.self, queueName: queueName, path: directory.url.appendingPathComponent("jobs.sqlite").path))
            }
        }
    }

    /// A step: which operation (0 add, 1 remove, 2 cancel, 3 process, 4 restart, 5 retry of a
    /// job that is not with the processor) and a number that picks its argument.
    static let steps = zip(Gen.int(in: 0...5), Gen.int(in: 0...7)).array(of: 1...30)

    @Test(arguments: Kind.allCases) func aQueueAndItsStorageFollowTheModel(_ kind: Kind) async throws {
        await propertyCheck(count: 40, input: Self.steps) { steps in
            try await Self.check(steps, kind)
        }
    }

    /// Found by the model test: `retry(_:)` put a job first in memory but stored it like an
    /// added one, last, so after a restart it ran last. Fixed: it stores the job with
    /// `persistFirst(_:)`, which both persisters implement.
    @Test(arguments: Kind.allCases) func aJobRetriedFirstIsStillFirstAfterARestart(_ kind: Kind) throws {
        let directory = try TemporaryDirectory()
        func persister() throws -> AnyJobPersister<CuteJob> { try kind.persister("retry", in: directory) }
        let queue = try JobQueue(handling: CuteJob.self, name: "retry", persister: persister())
        try queue.enqueue([CuteJob(id: "a"), CuteJob(id: "b")])
        queue.retry(CuteJob(id: "r"))
        queue.retry(CuteJob(id: "s"))
        try queue.enqueue([CuteJob(id: "c")])
        #expect(queue.peek()?.id == "s")
        #expect(queue.lastPersistenceError == nil)
        let restarted = try JobQueue(handling: CuteJob.self, name: "retry", persister: persister())
        #expect(restarted.drain().map(\.id) == ["s", "r", "a", "b", "c"])
    }

    static func check(_ steps: [(Int, Int)], _ kind: Kind) async throws {
        let directory = try TemporaryDirectory()
        func persister() throws -> AnyJobPersister<CuteJob> { try kind.persister("model", in: directory) }
        let processed = EventCollector<String>()
        let processor = SucceedingProcessor()
        /// A queue on the storage (what it holds is loaded), with the processor and an observer.
        func open() throws -> (JobQueue<CuteJob>, JobQueueNotificationToken<CuteJob>) {
            let queue = try JobQueue(handling: CuteJob.self, name: "model", persister: persister())
            queue.processor = AnyJobProcessor(processor)
            let token = queue.observe { _, jobs, event in
                if event == .processed { jobs.forEach { processed.record($0.id) } }
            }
            return (queue, token)
        }
        var (queue, token) = try open()
        var model: [String] = []
        var made = 0
        var processedSoFar = 0
        func newJob() -> CuteJob {
            made += 1
            return CuteJob(id: "a\(made)", action: "step")
        }

        for (operation, pick) in steps {
            switch operation {
            case 0:
                let jobs = (0...(pick % 3)).map { _ in newJob() }
                try await queue.enqueue(jobs)
                model += jobs.map(\.id)
            case 1:
                #expect(queue.remove()?.id == model.first)
                if !model.isEmpty { model.removeFirst() }
            case 2:
                let id = model.isEmpty || pick == 7 ? "missing" : model[pick % model.count]
                #expect(queue.cancel(id: id)?.id == (id == "missing" ? nil : id))
                model.removeAll { $0 == id }
            case 5:
                let job = newJob()
                queue.retry(job)
                model.insert(job.id, at: 0)
            case 3:
                queue.start()
                let seen = await processed.values(count: processedSoFar + model.count)
                #expect(Array(seen.dropFirst(processedSoFar)) == model, "processed in queue order")
                processedSoFar = seen.count
                queue.stop()
                model = []
            default:
                token.invalidate()
                (queue, token) = try open()
            }
            #expect(queue.count == model.count, "after step \(operation)/\(pick): \(model)")
            #expect(queue.peek()?.id == model.first)
            if operation == 4 {
                #expect(try persister().load().map(\.id) == model, "stored after a restart")
            }
        }
        token.invalidate()
        #expect(try persister().load().map(\.id) == model, "stored at the end")
        #expect(processor.count == processedSoFar, "each job processed once")
    }
}

/// Succeeds every job at once and counts them.
private final class SucceedingProcessor: JobProcessor, Sendable {
    private let processed = Mutex(0)

    var count: Int { processed.withLock { $0 } }

    fileprivate func processJob(_ job: CuteJob, completion: @escaping @Sendable (CuteJob, (any Error)?) -> Void) {
        processed.withLock { $0 += 1 }
        completion(job, nil)
    }
}

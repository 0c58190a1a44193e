import Foundation
import AsyncPrimitivesTesting
import QueueCore
import QueueCoreTesting
import Synchronization

/// Succeeds at once and records the action of every job it was handed, in order.
final class RecordingProcessor: JobProcessor, Sendable {
    let started = EventCollector<String>()

    func processJob(_ job: CuteJob, completion: @escaping @Sendable (CuteJob, (any Error)?) -> Void) {
        started.record(job.action)
        completion(job, nil)
    }
}

/// Fails every job at once and records the action of every job it was handed.
final class FailingProcessor: JobProcessor, Sendable {
    let started = EventCollector<String>()

    func processJob(_ job: CuteJob, completion: @escaping @Sendable (CuteJob, (any Error)?) -> Void) {
        started.record(job.action)
        completion(job, TestFailure())
    }
}

/// Holds every job until the test completes it, so a test can look at the queue while a job
/// is with the processor.
final class HoldingProcessor: JobProcessor, Sendable {
    let started = EventCollector<String>()
    private let completions = Mutex<[String: @Sendable (CuteJob, (any Error)?) -> Void]>([:])
    private let jobs = Mutex<[String: CuteJob]>([:])

    func processJob(_ job: CuteJob, completion: @escaping @Sendable (CuteJob, (any Error)?) -> Void) {
        completions.withLock { $0[job.action] = completion }
        jobs.withLock { $0[job.action] = job }
        started.record(job.action)
    }

    /// Completes the held job whose action is `action`, failing it with `error` if given.
    func complete(_ action: String, error: (any Error)? = nil) {
        let completion = completions.withLock { $0.removeValue(forKey: action) }
        let job = jobs.withLock { $0.removeValue(forKey: action) }
        if let completion, let job {
            completion(job, error)
        }
    }
}

/// Runs `body` for each job, then succeeds; lets a test act from inside processing.
final class CallbackProcessor: JobProcessor, Sendable {
    private let body: @Sendable (CuteJob) -> Void

    init(_ body: @escaping @Sendable (CuteJob) -> Void) {
        self.body = body
    }

    func processJob(_ job: CuteJob, completion: @escaping @Sendable (CuteJob, (any Error)?) -> Void) {
        body(job)
        completion(job, nil)
    }
}

/// The README's processor: does its work, then completes.
final class ReadmeUploader: JobProcessor, Sendable {
    private let upload: @Sendable (CuteJob) -> Void

    init(upload: @escaping @Sendable (CuteJob) -> Void) {
        self.upload = upload
    }

    func processJob(_ job: CuteJob, completion: @escaping @Sendable (CuteJob, (any Error)?) -> Void) {
        upload(job)                  // your work; call `completion(job, error)` when it fails
        completion(job, nil)
    }
}

/// Keeps the last job's completion, so that a test can call it more than once.
final class KeptCompletionProcessor: JobProcessor, Sendable {
    let started = EventCollector<String>()
    private let completion = Mutex<(@Sendable (CuteJob, (any Error)?) -> Void)?>(nil)

    func processJob(_ job: CuteJob, completion: @escaping @Sendable (CuteJob, (any Error)?) -> Void) {
        self.completion.withLock { $0 = completion }
        started.record(job.action)
    }

    /// Calls the kept completion on a thread of its own, outside Swift's tasks: whatever the queue
    /// does in the call (a delete from the persister included) is done when this returns.
    func complete(_ job: CuteJob, error: (any Error)?) async {
        let completion = self.completion.withLock { $0 }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                completion?(job, error)
                continuation.resume()
            }
        }
    }
}

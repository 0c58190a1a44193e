// Burns down 1,000,000 no-op jobs through one JobQueue, an OperationQueue
// (maxConcurrentOperationCount 1) and a serial DispatchQueue in the same run, with a bare
// Mutex<Deque> drain loop as the ceiling, and prints the peak memory of 1,000,000 queued jobs.
import DequeModule
import Dispatch
import Foundation
import QueueCore
import Synchronization

/// The job: shaped like the seed's `CuteJob` (a UUID string id, a date, no data).
struct NoopJob: QueueJob {
    var id: String = UUID().uuidString
    var createdDate = Date()
    var data: Data?
    var action: String = "noop"
}

/// Counts jobs and signals when the last one is done. Completes synchronously, like a
/// processor whose work is in memory.
final class NoopProcessor: JobProcessor, Sendable {
    private let remaining: Atomic<Int>
    let done = DispatchSemaphore(value: 0)

    init(expecting count: Int) {
        remaining = Atomic(count)
    }

    func processJob(_ job: NoopJob, completion: @escaping @Sendable (NoopJob, (any Error)?) -> Void) {
        completion(job, nil)
        if remaining.subtract(1, ordering: .relaxed).newValue == 0 { done.signal() }
    }
}

/// A counter for the peers, only ever touched from their serial queue.
// Touched only from one serial queue (OperationQueue with one operation at a time, or a
// serial DispatchQueue), and read after that queue has drained.
final class Counter: @unchecked Sendable {
    var value = 0
}

// `QueueCoreBenchmarks profile-seed RUNS JOBS` (or `profile`) runs only one JobQueue burn-down,
// RUNS times over JOBS jobs, for a profiler: under callgrind, the difference between two RUNS
// counts divided by JOBS is the instructions one job costs.
let profileArguments = CommandLine.arguments.dropFirst(2).compactMap { Int($0) }
let count = profileArguments.count > 1 ? profileArguments[1] : 1_000_000
let clock = ContinuousClock()

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

func rate(_ duration: Duration) -> Double {
    Double(count) / seconds(duration)
}

func format(_ rate: Double) -> String {
    String(format: "%6.2fM jobs/s", rate / 1e6)
}

func procStatus(_ key: String) -> String {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return "n/a" }
    let line = status.split(separator: "\n").first { $0.hasPrefix(key + ":") }
    return line.map { $0.dropFirst(key.count + 1).trimmingCharacters(in: .whitespaces) } ?? "n/a"
}

func kilobytes(_ value: String) -> Double {
    Double(value.split(separator: " ").first ?? "") ?? 0
}

// MARK: - Memory: 1,000,000 queued jobs

let rssBefore = kilobytes(procStatus("VmRSS"))
var memoryQueue: JobQueue<NoopJob>? = JobQueue(handling: NoopJob.self, name: "memory")
do {
    let jobs = (0..<count).map { _ in NoopJob() }
    memoryQueue?.add(jobs)
}
let rssQueued = kilobytes(procStatus("VmRSS"))
print("QueueCore benchmark: \(count) no-op jobs, one queue, serial (maxConcurrentJobs 1)")
print("memory: \(memoryQueue?.count ?? 0) queued jobs: RSS +\(Int((rssQueued - rssBefore) / 1024)) MiB (\(Int((rssQueued - rssBefore) * 1024 / Double(count))) bytes/job incl. the job's own strings); peak VmHWM \(procStatus("VmHWM"))")
memoryQueue = nil

let jobs = (0..<count).map { _ in NoopJob() }

// MARK: - The runs

func runJobQueue() -> Duration {
    let queue = JobQueue(handling: NoopJob.self, name: "bench")
    let processor = NoopProcessor(expecting: count)
    queue.processor = AnyJobProcessor(processor)
    let start = clock.now
    queue.start()
    queue.add(jobs)
    processor.done.wait()
    let elapsed = clock.now - start
    precondition(queue.count == 0)
    return elapsed
}

/// The seed's processor: a plain (non-final, non-Sendable) class that completes at once.
class SeedStyleProcessor: JobProcessor {
    typealias JobType = NoopJob
    func processJob(_ job: NoopJob, completion: @escaping @Sendable (NoopJob, (any Error)?) -> Void) {
        completion(job, nil)
    }
}

/// The seed's usage: a `JobProcessor` class and one `observe` observer that counts
/// `.processed`; the burn-down ends when the observer has heard of every job.
func runJobQueueSeedStyle() -> Duration {
    let queue = JobQueue(handling: NoopJob.self, name: "bench.seed")
    queue.processor = AnyJobProcessor(SeedStyleProcessor())
    let processed = Atomic<Int>(0)
    let done = DispatchSemaphore(value: 0)
    let token = queue.observe { _, jobs, event in
        if case .processed = event,
           processed.add(jobs.count, ordering: .relaxed).newValue == count {
            done.signal()
        }
    }
    let start = clock.now
    queue.start()
    queue.add(jobs)
    done.wait()
    let elapsed = clock.now - start
    withExtendedLifetime(token) {}
    precondition(queue.count == 0)
    return elapsed
}

func runJobQueueOneByOne() -> Duration {
    let queue = JobQueue(handling: NoopJob.self, name: "bench")
    let processor = NoopProcessor(expecting: count)
    queue.processor = AnyJobProcessor(processor)
    let start = clock.now
    queue.start()
    for job in jobs { queue.add([job]) }
    processor.done.wait()
    return clock.now - start
}

func runOperationQueue() -> Duration {
    let queue = OperationQueue()
    queue.maxConcurrentOperationCount = 1
    let counter = Counter()
    let start = clock.now
    for job in jobs {
        queue.addOperation { if !job.id.isEmpty { counter.value += 1 } }
    }
    queue.waitUntilAllOperationsAreFinished()
    let elapsed = clock.now - start
    precondition(counter.value == count)
    return elapsed
}

func runDispatchQueue() -> Duration {
    let queue = DispatchQueue(label: "bench.serial")
    let counter = Counter()
    let start = clock.now
    for job in jobs {
        queue.async { if !job.id.isEmpty { counter.value += 1 } }
    }
    queue.sync {}
    let elapsed = clock.now - start
    precondition(counter.value == count)
    return elapsed
}

func runBareLoop() -> Duration {
    let deque = Mutex(Deque<NoopJob>())
    var processed = 0
    let start = clock.now
    deque.withLock { $0.append(contentsOf: jobs) }
    while let job = deque.withLock({ $0.popFirst() }) {
        if !job.id.isEmpty { processed += 1 }
    }
    let elapsed = clock.now - start
    precondition(processed == count)
    return elapsed
}

func best(of runs: Int, _ body: () -> Duration) -> Double {
    (0..<runs).map { _ in rate(body()) }.max() ?? 0
}

// `QueueCoreBenchmarks profile[-seed] [RUNS [JOBS]]` runs only one JobQueue burn-down (see `count`).
let profileRuns = profileArguments.first ?? 5
if CommandLine.arguments.dropFirst().first == "profile-seed" {
    for _ in 0..<profileRuns { print(format(rate(runJobQueueSeedStyle()))) }
    exit(0)
}
if CommandLine.arguments.dropFirst().first == "profile" {
    for _ in 0..<profileRuns { print(format(rate(runJobQueue()))) }
    exit(0)
}

// Warm up the allocator and the code paths once.
_ = runJobQueue()
_ = runDispatchQueue()

let ours = best(of: 3, runJobQueue)
let oursOneByOne = best(of: 2, runJobQueueOneByOne)
let oursSeed = best(of: 3, runJobQueueSeedStyle)
let dispatch = best(of: 3, runDispatchQueue)
let operation = best(of: 1, runOperationQueue)
let bare = best(of: 3, runBareLoop)

print("JobQueue + processor (add all, start):   \(format(ours))")
print("JobQueue + processor (add one by one):   \(format(oursOneByOne))")
print("OperationQueue (max 1 concurrent):       \(format(operation))")
print("serial DispatchQueue:                    \(format(dispatch))")
print("bare Mutex<Deque> drain loop (ceiling):  \(format(bare))")
print("")
print("seed style: JobProcessor class + one observe observer counting .processed")
print("JobQueue (seed style):                   \(format(oursSeed))")
print(String(format: "ratio seed style / OperationQueue: %6.1fx   (peer %.3fM/s, target: >= 10x)   %@", oursSeed / operation, operation / 1e6, oursSeed / operation >= 10 ? "met" : "NOT MET"))
print(String(format: "ratio seed style / DispatchQueue:  %6.2fx   (peer %.2fM/s, target: >= 0.5x)  %@", oursSeed / dispatch, dispatch / 1e6, oursSeed / dispatch >= 0.5 ? "met" : "NOT MET"))
print("")
print(String(format: "ratio JobQueue / OperationQueue: %6.1fx   (target: >= 10x)   %@", ours / operation, ours / operation >= 10 ? "met" : "NOT MET"))
print(String(format: "ratio JobQueue / DispatchQueue:  %6.2fx   (target: >= 1x)    %@", ours / dispatch, ours >= dispatch ? "met" : "NOT MET"))
print(String(format: "ratio JobQueue / bare loop:      %6.2fx   (ceiling)", ours / bare))

import AsyncPrimitivesTesting
import Dispatch
import JobChain
import Testing

@Suite(.timeLimit(.minutes(1)))
struct ConcurrencyTests {
    @Test func manyJobsFedFromManyThreadsRunEveryCommandInOrder() async throws {
        let jobs = (0..<16).map { _ in Job(mode: .auto) }
        let logs = (0..<16).map { _ in EventCollector<Int>() }
        DispatchQueue.concurrentPerform(iterations: 16) { index in
            let job = jobs[index]
            let log = logs[index]
            for step in 0..<200 {
                switch step % 3 {
                case 0: job.doInBackground { log.record(step) }
                case 1: job.doInUtility { log.record(step) }
                default: job.doInMain { log.record(step) }
                }
            }
        }
        for job in jobs { try await job.idle() }
        for log in logs {
            #expect(log.values == Array(0..<200))
        }
    }

    @Test func controlCallsFromManyThreadsLeaveAConsistentJob() async throws {
        let ran = Counter()
        let job = Job(mode: .auto)
        DispatchQueue.concurrentPerform(iterations: 8) { index in
            for step in 0..<100 {
                job.doInBackground { ran.increment() }
                switch (index + step) % 7 {
                case 0: job.suspend()
                case 1, 2: job.resume()
                case 3: _ = job.state
                default: break
                }
            }
        }
        job.resume()
        try await job.idle()
        if job.state == .stopped {
            job.resume()
            try await job.idle()
        }
        #expect(ran.count == 800)
        #expect(job.state == .paused)
    }

    @Test func commandsMayControlTheirOwnJob() async throws {
        let done = EventCollector<String>()
        let job = Job(mode: .auto)
        job.doInBackground { [job] in
            job.doInMain { done.record("added from a command") }
            job.suspend()
            done.record("suspended itself")
        }
        try await job.idle()
        #expect(job.state == .stopped)
        job.resume()
        try await job.idle()
        #expect(done.values == ["suspended itself", "added from a command"])
    }
}

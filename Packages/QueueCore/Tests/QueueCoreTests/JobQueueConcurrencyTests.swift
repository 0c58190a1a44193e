import AsyncPrimitivesTesting
import QueueCore
import QueueCoreTesting
import Synchronization
import Testing

@Suite(.timeLimit(.minutes(1)))
struct JobQueueConcurrencyTests {
    @Test(arguments: [1, 4])
    func manyTasksAddingAndCancellingAtOnceProcessEveryJobExactlyOnceInProducerOrder(maxConcurrentJobs: Int) async {
        let producers = 8
        let perProducer = 300
        let queue = JobQueue(handling: CuteJob.self, name: "concurrent")
        queue.maxConcurrentJobs = maxConcurrentJobs
        let processor = RecordingProcessor()
        queue.processor = AnyJobProcessor(processor)
        queue.start()

        let batches = (0..<producers).map { makeJobs(count: perProducer, prefix: "p\($0)-") }
        let cancelled = await withTaskGroup(of: [String].self) { group in
            for batch in batches {
                // A producer adds its jobs one or two at a time…
                group.addTask {
                    var index = 0
                    while index < batch.count {
                        let size = index % 3 == 0 ? 2 : 1
                        queue.add(Array(batch[index..<min(index + size, batch.count)]))
                        index += size
                    }
                    return []
                }
                // …while another task cancels every fifth of them, whether or not it is added yet.
                group.addTask {
                    batch.enumerated().compactMap { offset, job in
                        offset % 5 == 0 ? queue.cancel(id: job.id)?.action : nil
                    }
                }
            }
            var cancelled: [String] = []
            for await actions in group { cancelled += actions }
            return cancelled
        }

        let total = producers * perProducer
        let processed = await processor.started.values(count: total - cancelled.count)
        #expect(Set(processed).count == processed.count, "a job was processed twice")
        #expect(Set(processed).isDisjoint(with: cancelled), "a cancelled job was processed")
        #expect(Set(processed).union(cancelled).count == total, "a job was lost")
        for producer in 0..<producers {
            let prefix = "p\(producer)-"
            let order = processed.filter { $0.hasPrefix(prefix) }.compactMap { Int($0.dropFirst(prefix.count)) }
            #expect(order == order.sorted(), "producer \(producer) lost its FIFO order")
        }
        #expect(queue.count == 0)
        #expect(processor.started.count == total - cancelled.count)
    }
}

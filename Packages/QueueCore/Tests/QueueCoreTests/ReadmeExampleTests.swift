import AsyncPrimitivesTesting
import QueueCore
import QueueCoreTesting
import Testing

@Suite(.timeLimit(.minutes(1)))
struct ReadmeExampleTests {
    @Test
    func readmeExampleProcessesThePersistedJobAndReportsIt() async throws {
        let persister = RecordingPersister()
        let uploaded = EventCollector<String>()
        let seen = EventCollector<String>()

        let queue = try JobQueue(handling: CuteJob.self, name: "Uploads", persister: persister)
        queue.processor = AnyJobProcessor(ReadmeUploader(upload: { uploaded.record($0.action) }))
        let token = queue.observe { queue, jobs, event in seen.record("\(event) \(jobs.map(\.action))") }
        var job = CuteJob()
        job.action = "create"
        queue.add([job])                     // persisted before `add` returns
        #expect(persister.storedIDs == [job.id])
        queue.start()

        #expect(await uploaded.values(count: 1) == ["create"])
        #expect(await seen.values(count: 3) == ["added [\"create\"]", "removed [\"create\"]", "processed [\"create\"]"])
        #expect(persister.jobs.isEmpty)
        withExtendedLifetime(token) {}
    }
}

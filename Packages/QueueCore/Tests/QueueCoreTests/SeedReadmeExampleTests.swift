import AsyncPrimitivesTesting
import Foundation
import QueueCore
import Testing

// The Cute README's examples, kept compiling; the job and processor types are in
// Support/SeedExample.swift.

@Suite(.timeLimit(.minutes(1)))
struct SeedReadmeExampleTests {
    @Test
    func observationUploadJobCarriesItsActionAndEncodedObservation() throws {
        let observation = Observation()
        observation.valueString = "Above Threshold"
        observation.subject = "Patient/123456"

        let job = try ObservationUploadJob(.create, observation)

        #expect(job.uploadAction == .create)
        let decoded = try JSONDecoder().decode(Observation.self, from: try #require(job.data))
        #expect(decoded.valueString == "Above Threshold")
    }

    @Test
    func readmeQueueAcceptsTheJobAndTheSeedProcessorProcessesIt() async throws {
        let observation = Observation()
        let job = try ObservationUploadJob(.update, observation)

        let observationUploadQueue = JobQueue(handling: ObservationUploadJob.self,
                                              name: "Observation Upload Queue")
        observationUploadQueue.add([job])
        #expect(observationUploadQueue.count == 1)

        let processor = ObservationUploadJobProcessor()
        let done = processor.done
        observationUploadQueue.processor = AnyJobProcessor(processor)
        observationUploadQueue.start()

        #expect(await done.values(count: 1) == [job.id])
        #expect(observationUploadQueue.count == 0)
    }

    @Test
    func readmeObserverSwitchSeesEveryEventKind() async throws {
        let observationUploadQueue = JobQueue(handling: ObservationUploadJob.self,
                                              name: "Observation Upload Queue")
        let seen = EventCollector<String>()
        let token = observationUploadQueue.observe { queue, jobs, event in
            switch event {
                case .added:
                    seen.record("\(jobs.count) added to \(queue.name)")
                case .removed:
                    seen.record("\(jobs.count) removed from \(queue.name)")
                case .cancelled:
                    seen.record("\(jobs.count) cancelled in \(queue.name)")
                case .processed:
                    seen.record("\(jobs.count) processed on \(queue.name)")
                case .failedToProcess:
                    seen.record("\(jobs.count) failed on \(queue.name)")
            }
        }
        let jobs = [ObservationUploadJob(), ObservationUploadJob()]
        observationUploadQueue.add(jobs)
        observationUploadQueue.cancel(id: jobs[1].id)

        let values = await seen.values(count: 2)
        #expect(values == ["2 added to Observation Upload Queue", "1 cancelled in Observation Upload Queue"])
        withExtendedLifetime(token) {}
    }

    @Test
    func readmePersisterHookUpPersistsAndReloads() throws {
        let name = "Observation Upload Queue"
        let persister = SeedMemoryPersister()
        let observationUploadQueue = JobQueue(handling: ObservationUploadJob.self, name: name)
        // Note: We need to type-erase using `AnyJobPersister` because you can't store
        // protocols with associated types as parameters or properties.
        observationUploadQueue.persister = AnyJobPersister(persister)
        let jobs = [ObservationUploadJob(), ObservationUploadJob()]
        observationUploadQueue.add(jobs)

        let reloaded = try JobQueue(handling: ObservationUploadJob.self,
                                    name: name,
                                    persister: persister)
        #expect(reloaded.count == 2)
        #expect(reloaded.peek()?.id == jobs[0].id)
    }
}

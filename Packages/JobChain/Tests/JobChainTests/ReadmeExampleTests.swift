import AsyncPrimitivesTesting
import JobChain
import Testing

@Suite(.timeLimit(.minutes(1)))
struct ReadmeExampleTests {
    @Test func readmeExampleRunsItsThreeCommandsInOrder() async throws {
        let printed = EventCollector<String>()
        let print: @Sendable (String) -> Void = { printed.record($0) }

        Job.addQueue(tag: "io", priority: .utility)
        let job = Job.doingInBackground {
            print("1: background")
        }.doInCustom("io", delay: 0.5) {
            print("2: on the io queue, half a second after 1 finished")
        }.doInMain {
            print("3: main queue, after 2")
        }
        try await job.idle()          // or job.await() from a thread that may block

        #expect(printed.values == [
            "1: background",
            "2: on the io queue, half a second after 1 finished",
            "3: main queue, after 2",
        ])
    }
}

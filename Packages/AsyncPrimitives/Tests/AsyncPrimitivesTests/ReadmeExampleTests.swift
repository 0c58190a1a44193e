import AsyncPrimitives
import Dispatch
import Testing

@Suite(.timeLimit(.minutes(1)))
struct ReadmeExampleTests {
    @Test func readmeExampleChainsFutureResultsAndAwaitsTheEnd() async throws {
        // --- README example (keep in sync with README.md) ---
        func fetchScores() -> FutureResult<[Int]> {
            let deferred = DeferredResult<[Int]>()
            DispatchQueue.global().async { deferred.success(value: [72, 95, 41, 88]) }
            return deferred
        }

        let passed = fetchScores()
            .timeoutAfter(interval: 5)   // fails with AsyncPrimitivesError(.timedOut) if late
            .filter { $0 >= 50 }          // element-wise, on CallbackQueue.default
            .map { "score \($0)" }
        let lines = try await passed.value // or: passed.then { result in … }
        // --- end of README example ---
        #expect(lines == ["score 72", "score 95", "score 88"])
    }
}

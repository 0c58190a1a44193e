import AsyncPrimitives
import AsyncPrimitivesTesting
import Dispatch
import Foundation
import Testing

@Suite(.timeLimit(.minutes(1)))
struct FutureResultTests {
    private enum StepError: Error, Equatable {
        case step(Int)
    }

    @Test func resultHandlerCompletionReceivesTheHTML() async throws {
        let results = EventCollector<String>()
        let loader = FakeLoader(data: Data("<html>swift</html>".utf8))
        loadSwiftOrgHTML(using: loader) { result in
            switch result {
            case .success(let html):
                results.record(html)
            case .failure(let error):
                results.record("error: \(error)")
            }
        }
        #expect(await results.values(count: 1) == ["<html>swift</html>"])
    }

    @Test func deferredResultLoaderSucceedsFailsAndReportsAnInvalidResponse() async throws {
        let ok = loadSwiftOrgHTML(using: FakeLoader(data: Data("<html/>".utf8)))
        #expect(try await ok.value == "<html/>")

        let offline = loadSwiftOrgHTML(using: FakeLoader(error: BookError.offline))
        await #expect(throws: BookError.offline) { try await offline.value }

        let invalid = loadSwiftOrgHTML(using: FakeLoader(data: Data([0xff, 0xfe, 0xfd])))
        await #expect(throws: LoadError.invalidResponse) { try await invalid.value }
    }

    @Test func seedStyleTrailingClosureHandlerSwitchesOnTheResult() async {
        let messages = EventCollector<String>()
        loadSwiftOrgHTML(using: FakeLoader(error: BookError.offline)).then { result in
            switch result {
            case .success(let html):
                messages.record(html)
            case .failure(let error):
                let message = String(describing: error)
                messages.record(message)
            }
        }
        #expect(await messages.values(count: 1) == ["offline"])
    }

    @Test func aSecondFillOfADeferredResultReturnsFalse() async throws {
        let deferred = DeferredResult<Int>()
        #expect(deferred.success(value: 1))
        #expect(!deferred.failure(error: StepError.step(1)))
        #expect(!deferred.success(value: 2))
        #expect(try await deferred.value == 1)
    }

    // Each of the seed's five shapes, passed as a named function so that overload resolution
    // is exercised exactly as a user's code would exercise it.

    @Test func shapeReturningAFutureResult() async throws {
        let chained: FutureResult<String> = FutureResult(value: 4).pipe(upon: .global(), into: Self.describeLater)
        #expect(try await chained.value == "4")
        let literal = FutureResult(value: 5).pipe(upon: .global()) { FutureResult(value: $0 * 2) }
        #expect(try await literal.value == 10)
    }

    @Test func shapeThrowingAndReturningAFuture() async throws {
        let chained: FutureResult<Int> = FutureResult(value: 4).pipe(upon: .global(), into: Self.doubleLaterUnlessNegative)
        #expect(try await chained.value == 8)
        let failed = FutureResult(value: -1).pipe(upon: .global(), into: Self.doubleLaterUnlessNegative)
        await #expect(throws: StepError.step(-1)) { try await failed.value }
    }

    @Test func shapeReturningAFuture() async throws {
        let chained: FutureResult<Int> = FutureResult(value: 4).pipe(upon: .global(), into: Self.tripleLater)
        #expect(try await chained.value == 12)
        let literal = FutureResult(value: 5).pipe(upon: .global()) { Future(value: $0 + 1) }
        #expect(try await literal.value == 6)
    }

    @Test func shapeThrowingAndReturningAValue() async throws {
        let chained: FutureResult<Int> = FutureResult(value: 4).pipe(upon: .global(), into: Self.negateUnlessZero)
        #expect(try await chained.value == -4)
        let failed = FutureResult(value: 0).pipe(upon: .global(), into: Self.negateUnlessZero)
        await #expect(throws: StepError.step(0)) { try await failed.value }
    }

    @Test func shapeReturningAValue() async throws {
        let chained: FutureResult<String> = FutureResult(value: 4).pipe(upon: .global(), into: Self.describe)
        #expect(try await chained.value == "4")
        let literal = FutureResult(value: 5).pipe(upon: .global()) { $0 + 1 }
        #expect(try await literal.value == 6)
    }

    @Test func throwingFunctionReturningAFutureResultIsFlattened() async throws {
        let chained: FutureResult<String> = FutureResult(value: 3).pipe(upon: .global(), into: Self.describeLaterUnlessZero)
        #expect(try await chained.value == "3")
        let failed = FutureResult(value: 0).pipe(upon: .global(), into: Self.describeLaterUnlessZero)
        await #expect(throws: StepError.step(0)) { try await failed.value }
    }

    @Test func aThrowSkipsTheRestOfTheChainAndReachesTheFinalHandler() async {
        let ran = EventLog<Int>()
        let final = EventCollector<String>()
        FutureResult(value: 1)
            .pipe(upon: .global()) { (value: Int) -> Int in ran.append(1); return value + 1 }
            .pipe(upon: .global()) { (value: Int) throws -> Int in ran.append(2); throw StepError.step(2) }
            .pipe(upon: .global()) { (value: Int) -> FutureResult<Int> in ran.append(3); return FutureResult(value: value) }
            .pipe(upon: .global()) { (value: Int) -> Future<Int> in ran.append(4); return Future(value: value) }
            .pipe(upon: .global()) { (value: Int) -> String in ran.append(5); return "\(value)" }
            .then(upon: .global()) { result in
                switch result {
                case .success(let value): final.record("success \(value)")
                case .failure(let error): final.record("failure \(error)")
                }
            }
        #expect(await final.values(count: 1) == ["failure step(2)"])
        #expect(ran.values == [1, 2])
    }

    @Test func aFailedFutureResultSkipsTheRestOfTheChain() async {
        let ran = EventLog<Int>()
        let chained = FutureResult(value: 1)
            .pipe(upon: .global()) { (_: Int) -> FutureResult<Int> in ran.append(1); return FutureResult(error: StepError.step(1)) }
            .pipe(upon: .global()) { (value: Int) throws -> Future<Int> in ran.append(2); return Future(value: value) }
            .pipe(upon: .global()) { (value: Int) throws -> Int in ran.append(3); return value }
        await #expect(throws: StepError.step(1)) { try await chained.value }
        #expect(ran.values == [1])
    }

    @Test func searchForInStockBooksChainUpdatesTheTableWithInStockBooks() async throws {
        let webclient = FakeWebClient()
        let datastore = FakeDataStore()
        let table = EventCollector<[BookViewMaster]>()
        let updateTableView: ResultHandler<[BookViewMaster]> = { result in
            table.record((try? result.get()) ?? [])
        }
        searchForInStockBooks(query: "swift", webclient: webclient, datastore: datastore, updateTableView: updateTableView)
        let books = [BookModel(title: "Swift", stock: 2), BookModel(title: "Dispatch", stock: 0), BookModel(title: "Linux", stock: 1)]
        webclient.pending.success(value: books)
        #expect(await table.values(count: 1) == [[BookViewMaster(caption: "Swift (2)"), BookViewMaster(caption: "Linux (1)")]])
        #expect(datastore.saved.values == [books])
    }

    @Test func searchForInStockBooksReportsAFailedSave() async {
        let webclient = FakeWebClient()
        let datastore = FakeDataStore(failure: .diskFull)
        let errors = EventCollector<String>()
        searchForInStockBooks(query: "swift", webclient: webclient, datastore: datastore) { result in
            if case .failure(let error) = result { errors.record("\(error)") }
        }
        webclient.pending.success(value: [BookModel(title: "Swift", stock: 2)])
        #expect(await errors.values(count: 1) == ["diskFull"])
    }

    @Test func timeoutFailsWithATypedErrorAndIgnoresALateSuccess() async throws {
        let clock = ManualClock()
        let source = DeferredResult<Int>()
        let limited = source.timeoutAfter(interval: 10.0, clock: clock)
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(9))
        #expect(!limited.isFilled)
        clock.advance(by: .seconds(1))
        let error = await #expect(throws: AsyncPrimitivesError.self) { try await limited.value }
        #expect(error?.code == .timedOut)
        #expect(source.success(value: 5))
        await #expect(throws: AsyncPrimitivesError.self) { try await limited.value }
    }

    @Test func timeoutPassesAnEarlyResultOnAndStopsItsTimer() async throws {
        let clock = ManualClock()
        let source = DeferredResult<Int>()
        let limited = source.timeoutAfter(interval: 10.0, clock: clock)
        await clock.sleepers(atLeast: 1)
        source.success(value: 5)
        #expect(try await limited.value == 5)
        #expect(clock.sleeperCount == 0)
        clock.advance(by: .seconds(60))
        #expect(try await limited.value == 5)
    }

    @Test func timeoutPassesAnEarlyFailureOn() async {
        let source = DeferredResult<Int>()
        let limited = source.timeoutAfter(interval: 10.0, clock: ManualClock())
        source.failure(error: StepError.step(7))
        await #expect(throws: StepError.step(7)) { try await limited.value }
    }

    @Test func elementWiseFilterAndMapSkipAFailure() async {
        let ran = EventLog<Int>()
        let failed = FutureResult<[Int]>(error: StepError.step(9))
            .filter(upon: .global()) { ran.append($0); return true }
            .map(upon: .global()) { (value: Int) -> Int in ran.append(value); return value }
        await #expect(throws: StepError.step(9)) { try await failed.value }
        #expect(ran.values.isEmpty)
    }

    @Test func elementWiseMapThatThrowsFailsTheChain() async {
        let mapped = FutureResult(value: [1, 2, 3]).map(upon: .global()) { (value: Int) throws -> Int in
            if value == 2 { throw StepError.step(value) }
            return value
        }
        await #expect(throws: StepError.step(2)) { try await mapped.value }
    }

    @Test func futureResultFromAnAsyncThrowingClosure() async throws {
        let succeeded = FutureResult { () async throws -> String in
            await Task.yield()
            return "done"
        }
        #expect(try await succeeded.value == "done")
        let failed = FutureResult { () async throws -> String in
            throw StepError.step(1)
        }
        await #expect(throws: StepError.step(1)) { try await failed.value }
    }

    @Test func aCancelledAwaitIsResumedWithCancellationErrorExactlyOnce() async throws {
        let deferred = DeferredResult<Int>()
        let started = EventCollector<Bool>()
        let waiter = Task {
            started.record(true)
            return try await deferred.value
        }
        _ = await started.values(count: 1)
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        // The fill after the cancellation must not resume the continuation a second time
        // (a checked continuation would crash the process).
        deferred.success(value: 1)
        #expect(try await deferred.value == 1)
    }

    @Test func anAwaitCancelledBeforeItStartsThrowsCancellationError() async {
        let deferred = DeferredResult<Int>()
        let waiter = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await deferred.value
        }
        await #expect(throws: CancellationError.self) { try await waiter.value }
        deferred.success(value: 1)
    }

    /// A success of `nil` (a `FutureResult` of an optional) fills the future like any value.
    @Test func aFutureResultOfAnOptionalFilledWithNilIsFilledOnce() async throws {
        let deferred = DeferredResult<Int?>()
        #expect(!deferred.isFilled)
        #expect(deferred.success(value: nil))
        #expect(deferred.isFilled)
        #expect(!deferred.success(value: 1))
        #expect(!deferred.failure(error: StepError.step(1)))
        #expect(try await deferred.value == nil)
        let described = deferred.pipe(upon: DispatchQueue(label: "optional-result")) { (value: Int?) -> String in
            value.map(String.init) ?? "none"
        }
        #expect(try await described.value == "none")
    }

    @Test func aHundredThousandLinkResultChainCompletes() async throws {
        let queue = DispatchQueue(label: "deep-result-chain")
        let start = DeferredResult<Int>()
        var future: FutureResult<Int> = start
        for index in 0..<100_000 {
            if index.isMultiple(of: 2) {
                future = future.pipe(upon: queue) { (value: Int) -> Int in value + 1 }
            } else {
                future = future.pipe(upon: queue) { (value: Int) throws -> Int in value + 1 }
            }
        }
        start.success(value: 0)
        #expect(try await future.value == 100_000)
    }

    @Test func aHundredThousandLinkChainPassesAnEarlyFailureToTheEnd() async {
        let queue = DispatchQueue(label: "deep-failed-chain")
        let start = DeferredResult<Int>()
        var future: FutureResult<Int> = start
        for _ in 0..<100_000 {
            future = future.pipe(upon: queue) { (value: Int) -> FutureResult<Int> in FutureResult(value: value + 1) }
        }
        start.failure(error: StepError.step(0))
        await #expect(throws: StepError.step(0)) { try await future.value }
    }

    /// A loop written as recursion (paging, polling, retrying): each step returns the next
    /// step's future from its `pipe`. The last step's fill passes the value back up through
    /// every step's future: that ran as nested calls, one per step, and overflowed the stack.
    @Test func aHundredThousandStepRecursiveResultLoopCompletes() async throws {
        let queue = DispatchQueue(label: "recursive-result-loop")
        @Sendable func loop(_ steps: Int) -> FutureResult<Int> {
            steps == 0 ? FutureResult(value: 0) : FutureResult(value: steps).pipe(upon: queue) { (value: Int) in loop(value - 1) }
        }
        #expect(try await loop(100_000).value == 0)
    }

    @Test func aHundredThousandStepRecursiveLoopCompletes() async {
        let queue = DispatchQueue(label: "recursive-loop")
        @Sendable func loop(_ steps: Int) -> Future<Int> {
            steps == 0 ? Future(value: 0) : Future(value: steps).pipe(upon: queue) { (value: Int) in loop(value - 1) }
        }
        #expect(await loop(100_000).value == 0)
    }

    private static func describeLater(_ value: Int) -> FutureResult<String> {
        let deferred = DeferredResult<String>()
        DispatchQueue.global().async { deferred.success(value: "\(value)") }
        return deferred
    }

    private static func describeLaterUnlessZero(_ value: Int) throws -> FutureResult<String> {
        if value == 0 { throw StepError.step(0) }
        return describeLater(value)
    }

    private static func doubleLaterUnlessNegative(_ value: Int) throws -> Future<Int> {
        if value < 0 { throw StepError.step(value) }
        let deferred = Deferred<Int>()
        DispatchQueue.global().async { deferred.fill(value: value * 2) }
        return deferred
    }

    private static func tripleLater(_ value: Int) -> Future<Int> {
        let deferred = Deferred<Int>()
        DispatchQueue.global().async { deferred.fill(value: value * 3) }
        return deferred
    }

    private static func negateUnlessZero(_ value: Int) throws -> Int {
        if value == 0 { throw StepError.step(0) }
        return -value
    }

    private static func describe(_ value: Int) -> String {
        "\(value)"
    }
}

/// The seed's `searchForInStockBooks`, with the view controller's members passed in.
private func searchForInStockBooks(
    query: String,
    webclient: FakeWebClient,
    datastore: FakeDataStore,
    updateTableView: @escaping ResultHandler<[BookViewMaster]>
) {
    let controller = BookSearchController(webclient: webclient, datastore: datastore, onUpdate: updateTableView)
    controller.searchForInStockBooks(query: query)
}

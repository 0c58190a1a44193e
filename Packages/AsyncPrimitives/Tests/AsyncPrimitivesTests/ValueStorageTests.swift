import AsyncPrimitives
import AsyncPrimitivesTesting
import Dispatch
import Testing

/// A future keeps its value in three words of its own, or in a heap box when the value is
/// larger or more aligned: either way every handler and every `await` gets the value, the
/// future keeps it alive while it lives, and it is destroyed once, with the future.
@Suite(.timeLimit(.minutes(1)))
struct ValueStorageTests {
    /// One word: stored in place.
    struct OneWord: Sendable {
        let tracked: Tracked
    }

    /// Three words (a `String` is two): the most that is stored in place.
    struct ThreeWords: Sendable {
        let tracked: Tracked
        let label: String
    }

    /// Six words: stored in a heap box.
    struct SixWords: Sendable {
        let label: String
        let tracked: Tracked
        let other: String
        let number: Int
    }

    /// Aligned to 16 bytes: stored in a heap box even though it is small.
    struct OverAligned: Sendable {
        let vector: SIMD4<Float>
        let tracked: Tracked
    }

    enum Kind: String, CaseIterable, Sendable {
        case oneWord, threeWords, sixWords, overAligned
    }

    /// Makes a value of `kind` holding `tracked`, and reads `tracked`'s name back from one.
    private func check(_ kind: Kind, _ body: (Maker) async -> Void) async {
        switch kind {
        case .oneWord:
            await body(Maker(make: { OneWord(tracked: $0) }, name: { ($0 as? OneWord)?.tracked.name }))
        case .threeWords:
            await body(Maker(
                make: { ThreeWords(tracked: $0, label: "three") },
                name: { ($0 as? ThreeWords).map { "\($0.tracked.name) \($0.label)" } }
            ))
        case .sixWords:
            await body(Maker(
                make: { SixWords(label: "six", tracked: $0, other: String(repeating: "x", count: 40), number: 6) },
                name: { ($0 as? SixWords).map { "\($0.tracked.name) \($0.label) \($0.other.count) \($0.number)" } }
            ))
        case .overAligned:
            await body(Maker(
                make: { OverAligned(vector: SIMD4(1, 2, 3, 4), tracked: $0) },
                name: { ($0 as? OverAligned).map { "\($0.tracked.name) \($0.vector.sum())" } }
            ))
        }
    }

    struct Maker: Sendable {
        let make: @Sendable (Tracked) -> any Sendable
        let name: @Sendable (any Sendable) -> String?
    }

    private static let expectedNames: [Kind: String] = [
        .oneWord: "value", .threeWords: "value three", .sixWords: "value six 40 6",
        .overAligned: "value 10.0",
    ]

    @Test(arguments: Kind.allCases)
    func aDeferredHandsItsValueToEveryHandlerAndFreesItWithTheFuture(kind: Kind) async {
        await check(kind) { maker in
            await roundTrip(kind, maker, of: Deferred<any Sendable>.self)
        }
    }

    /// The same through `Future`, `FutureResult` and `DeferredResult`, typed by the value
    /// (specialised code) rather than `any Sendable`.
    @Test(arguments: Kind.allCases)
    func everyFutureTypeKeepsAValueOfEveryLayout(kind: Kind) async throws {
        let queue = namedQueue("value-storage-typed-\(kind)")
        let weak: WeakBox<Tracked>
        let names = EventCollector<String>()
        do {
            let tracked = Tracked("value")
            weak = WeakBox(tracked)
            switch kind {
            case .oneWord:
                try await typedRoundTrip(OneWord(tracked: tracked), on: queue, names: names) { $0.tracked.name }
            case .threeWords:
                try await typedRoundTrip(ThreeWords(tracked: tracked, label: "three"), on: queue, names: names) {
                    "\($0.tracked.name) \($0.label)"
                }
            case .sixWords:
                let value = SixWords(label: "six", tracked: tracked, other: String(repeating: "x", count: 40), number: 6)
                try await typedRoundTrip(value, on: queue, names: names) {
                    "\($0.tracked.name) \($0.label) \($0.other.count) \($0.number)"
                }
            case .overAligned:
                try await typedRoundTrip(OverAligned(vector: SIMD4(1, 2, 3, 4), tracked: tracked), on: queue, names: names) {
                    "\($0.tracked.name) \($0.vector.sum())"
                }
            }
        }
        let expected = Self.expectedNames[kind]!
        // Future(value:), Deferred, FutureResult(value:), DeferredResult: one `await` and a
        // handler attached after the fill each, and one attached before it to each deferred.
        #expect(await names.values(count: 10) == Array(repeating: expected, count: 10))
        await expectReleased(weak, after: queue)
    }

    private func typedRoundTrip<Value: Sendable>(
        _ value: Value,
        on queue: DispatchQueue,
        names: EventCollector<String>,
        name: @escaping @Sendable (Value) -> String
    ) async throws {
        let ready = Future(value: value)
        let deferred = Deferred<Value>()
        let readyResult = FutureResult(value: value)
        let deferredResult = DeferredResult<Value>()
        let handled = EventCollector<Void>()
        deferred.then(upon: queue) { names.record(name($0)); handled.record(()) }
        deferredResult.then(upon: queue) { result in
            names.record((try? result.get()).map(name) ?? "failure")
            handled.record(())
        }
        deferred.fill(value: value)
        deferredResult.success(value: value)
        for future in [ready, deferred] {
            future.then(upon: queue) { names.record(name($0)); handled.record(()) }
            names.record(name(await future.value))
        }
        for future in [readyResult, deferredResult] {
            future.then(upon: queue) { result in
                names.record((try? result.get()).map(name) ?? "failure")
                handled.record(())
            }
            names.record(name(try await future.value))
        }
        _ = await handled.values(count: 6)
    }

    /// Fills a future of `any Sendable` with a value of `kind`: every handler and `await` gets
    /// it, the future keeps it alive, and it is freed with the future.
    private func roundTrip(_ kind: Kind, _ maker: Maker, of _: Deferred<any Sendable>.Type) async {
        let queue = namedQueue("value-storage-\(kind)")
        let expected = Self.expectedNames[kind]!
        let weak: WeakBox<Tracked>
        let names = EventCollector<String>()
        do {
            let tracked = Tracked("value")
            weak = WeakBox(tracked)
            let deferred = Deferred<any Sendable>()
            deferred.then(upon: queue) { names.record(maker.name($0) ?? "wrong type") }
            deferred.fill(value: maker.make(tracked))
            deferred.then(upon: queue) { names.record(maker.name($0) ?? "wrong type") }
            names.record(maker.name(await deferred.value) ?? "wrong type")
            #expect(await names.values(count: 3) == [expected, expected, expected])
            // The future still holds the value.
            #expect(weak.object != nil)
            withExtendedLifetime(deferred) {}
        }
        await expectReleased(weak, after: queue)
    }

    /// A future dropped unfilled, or filled and dropped with no handler, frees what it holds.
    @Test func aFutureThatIsNeverObservedFreesItsValue() async {
        let weakBoxed: WeakBox<Tracked>
        let weakInPlace: WeakBox<Tracked>
        do {
            let boxed = Tracked("boxed")
            let inPlace = Tracked("in place")
            weakBoxed = WeakBox(boxed)
            weakInPlace = WeakBox(inPlace)
            let big = DeferredResult<SixWords>()
            big.success(value: SixWords(label: "", tracked: boxed, other: "", number: 0))
            let small = Deferred<OneWord>()
            small.fill(value: OneWord(tracked: inPlace))
            _ = DeferredResult<OneWord>()
            #expect(weakBoxed.object != nil)
            withExtendedLifetime((big, small)) {}
        }
        #expect(weakBoxed.object == nil)
        #expect(weakInPlace.object == nil)
    }
}

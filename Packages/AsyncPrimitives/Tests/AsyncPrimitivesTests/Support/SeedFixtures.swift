import AsyncPrimitives
import Dispatch
import Foundation

// The seed's example functions, written as the seed shows them (adapted only where Swift 6
// forces it), so the tests show that the seed's code compiles against our API.

func calculateFibonacciNumber(_ index: UInt8) -> Future<UInt64> {
    let deferred = Deferred<UInt64>()
    DispatchQueue.global().async {
        if index == 0 {
            deferred.fill(value: 0)
        } else if index == 1 || index == 2 {
            deferred.fill(value: 1)
        } else {
            var currentIndex: UInt64 = 3
            var currentValue: UInt64 = 2
            var previousValue: UInt64 = 1

            while currentIndex < index {
                let nextValue = previousValue + currentValue
                previousValue = currentValue
                currentValue = nextValue
                currentIndex += 1
            }
            deferred.fill(value: currentValue)
        }
    }
    return deferred
}

func findFactors(value: UInt64) -> Future<[UInt64]> {
    let deferred = Deferred<[UInt64]>()

    DispatchQueue.global().async {
        let squareRoot = UInt64(sqrt(Double(value)))
        let factors: [UInt64] = (1...squareRoot).filter({ value % $0 == 0 }).flatMap({ [ $0, value / $0 ] }).sorted()
        deferred.fill(value: factors)
    }

    return deferred
}

func sum(of values: [UInt64]) -> UInt64 {
    return values.reduce(0, { $0 + $1 })
}

func sumOfFactorsForFibonacciNumber(_ index: UInt8) -> Future<UInt64> {
    let future = calculateFibonacciNumber(index)
                 .then(pipeInto: findFactors(value:))
                 .then(pipeInto: sum(of:))
    return future
}

enum LoadError: Error, Equatable {
    case invalidResponse
}

/// Stands in for `URLSession`: answers with canned data or an error, on a global queue.
struct FakeLoader: Sendable {
    var data: Data?
    var error: (any Error)?

    func dataTask(completion: @escaping @Sendable (Data?, (any Error)?) -> Void) {
        let data = self.data
        let error = self.error
        DispatchQueue.global().async { completion(data, error) }
    }
}

/// The seed's `loadSwiftOrgHTML(completion:)`, with a `ResultHandler`.
func loadSwiftOrgHTML(using loader: FakeLoader, completion: @escaping ResultHandler<String>) {
    loader.dataTask { data, error in
        if let error = error {
            completion(.failure(error))
        } else if
            let data = data,
            let html = String(data: data, encoding: .utf8) {

            completion(.success(html))
        } else {
            let loadError = LoadError.invalidResponse
            completion(.failure(loadError))
        }
    }
}

/// The seed's `loadSwiftOrgHTML()` returning a `FutureResult`.
func loadSwiftOrgHTML(using loader: FakeLoader) -> FutureResult<String> {
    let deferred = DeferredResult<String>()
    loader.dataTask { data, error in
        if let error = error {
            deferred.failure(error: error)
        } else if
            let data = data,
            let html = String(data: data, encoding: .utf8) {

            deferred.success(value: html)
        } else {
            let loadError = LoadError.invalidResponse
            deferred.failure(error: loadError)
        }
    }
    return deferred
}

struct BookModel: Equatable, Sendable {
    var title: String
    var stock: Int
}

struct BookViewMaster: Equatable, Sendable {
    var caption: String
}

enum BookError: Error, Equatable {
    case offline
    case diskFull
}

/// A web client whose `findBooks` answers when the test says so.
final class FakeWebClient: Sendable {
    let pending = DeferredResult<[BookModel]>()

    func findBooks(_ query: String) -> FutureResult<[BookModel]> {
        pending
    }
}

/// A data store that records what it saved.
final class FakeDataStore: Sendable {
    let saved = EventLog<[BookModel]>()
    let failure: BookError?

    init(failure: BookError? = nil) {
        self.failure = failure
    }

    func saveBooks(_ books: [BookModel]) -> FutureResult<[BookModel]> {
        let deferred = DeferredResult<[BookModel]>()
        DispatchQueue.global().async { [self] in
            if let failure {
                deferred.failure(error: failure)
            } else {
                saved.append(books)
                deferred.success(value: books)
            }
        }
        return deferred
    }
}

/// A completion handler that receives either a value or the error that prevented it.
///
/// The seed's `Result<Value>` is Swift's own `Result<Value, any Error>` here, and the handler
/// is `@Sendable`: completions are called from other threads (the seed's own example captures
/// one in a `URLSession` completion), which Swift 6 only allows for a `Sendable` closure.
///
/// ```swift
/// func loadSwiftOrgHTML(completion: @escaping ResultHandler<String>) { … }
/// ```
public typealias ResultHandler<Value> = @Sendable (Result<Value, any Error>) -> Void

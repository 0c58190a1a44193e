/// A completion handler that receives either a value or the error that prevented it.
///
/// The seed's `Result<Value>` is Swift's own `Result<Value, any Error>` here.
///
/// ```swift
/// func loadSwiftOrgHTML(completion: @escaping ResultHandler<String>) { … }
/// ```
public typealias ResultHandler<Value> = (Result<Value, any Error>) -> Void

public import Foundation

/// An object data source that presents several sources one after another: the sections of
/// the first, then the sections of the second, and so on.
///
/// ```swift
/// let all = ConcatenatingObjectDataSource(dataSources: [favourites, recent])
/// all.numberOfSections() // favourites' sections + recent's sections
/// ```
public struct ConcatenatingObjectDataSource<ObjectType>: ObjectDataSource {
    /// The wrapped sources, in order.
    public let dataSources: [any ObjectDataSource<ObjectType>]

    /// Creates a source presenting `dataSources` in order.
    ///
    /// - Parameter dataSources: The sources whose sections are concatenated.
    public init(dataSources: [any ObjectDataSource<ObjectType>]) {
        self.dataSources = dataSources
    }

    /// The total number of sections of all wrapped sources.
    ///
    /// - Returns: The sum of the sources' section counts.
    public func numberOfSections() -> Int {
        dataSources.reduce(0) { $0 + $1.numberOfSections() }
    }

    /// The number of objects in `section`, counted across the wrapped sources.
    ///
    /// - Parameter section: The index of a section.
    /// - Returns: The number of objects there, or zero for a section that does not exist.
    public func numberOfObjectsInSection(_ section: Int) -> Int {
        guard let (source, local) = locate(section) else { return 0 }
        return source.numberOfObjectsInSection(local)
    }

    /// The object at `indexPath`, read from the wrapped source that owns the section.
    ///
    /// - Parameter indexPath: A section and a row.
    /// - Returns: The object at that position.
    /// - Throws: `AsyncPrimitivesError` with code `.indexOutOfRange` for a position that does
    ///   not exist; whatever the wrapped source throws otherwise.
    public func objectAt(_ indexPath: IndexPath) throws -> ObjectType {
        let position = try indexPath.validated(in: self)
        guard let (source, local) = locate(position.section) else {
            throw ObjectDataSourceErrors.indexOutOfRange(indexPath, reason: "no wrapped source owns the section")
        }
        return try source.objectAt(IndexPath(indexes: [local, position.row]))
    }

    /// The title of `section`, from the wrapped source that owns it.
    ///
    /// - Parameter section: The index of a section.
    /// - Returns: The title, or `nil`.
    public func titleOfSection(_ section: Int) -> String? {
        guard let (source, local) = locate(section) else { return nil }
        return source.titleOfSection(local)
    }

    /// The wrapped source that owns `section`, and the section's index within it.
    private func locate(_ section: Int) -> (any ObjectDataSource<ObjectType>, Int)? {
        guard section >= 0 else { return nil }
        var remaining = section
        for source in dataSources {
            let count = source.numberOfSections()
            if remaining < count { return (source, remaining) }
            remaining -= count
        }
        return nil
    }
}

/// Not `Sendable`: it holds sources of any kind, which need not be Sendable. Use it from one isolation domain
/// (typically the main actor, like the list view it feeds).
@available(*, unavailable)
extension ConcatenatingObjectDataSource: Sendable {}

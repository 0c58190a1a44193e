public import Foundation

/// An object data source that converts the objects of another source as they are read.
///
/// The transform runs on every ``objectAt(_:)`` call, never up front, so wrapping a large
/// store costs nothing until rows are shown.
///
/// ```swift
/// let rows = TransformingObjectDataSource(objectDataSource: books) { BookRow(book: $0) }
/// ```
public struct TransformingObjectDataSource<Source: ObjectDataSource, ObjectType>: ObjectDataSource {
    /// The wrapped source.
    public let objectDataSource: Source
    private let transform: (Source.ObjectType) throws -> ObjectType

    /// Creates a source whose objects are `transform` applied to `objectDataSource`'s objects.
    ///
    /// - Parameters:
    ///   - objectDataSource: The source to wrap.
    ///   - transform: Converts one object; called on every read. An error it throws is thrown
    ///     from ``objectAt(_:)``.
    public init(
        objectDataSource: Source,
        transform: @escaping (Source.ObjectType) throws -> ObjectType
    ) {
        self.objectDataSource = objectDataSource
        self.transform = transform
    }

    /// The wrapped source's number of sections.
    ///
    /// - Returns: The number of sections.
    public func numberOfSections() -> Int {
        objectDataSource.numberOfSections()
    }

    /// The wrapped source's number of objects in `section`.
    ///
    /// - Parameter section: The index of a section.
    /// - Returns: The number of objects there.
    public func numberOfObjectsInSection(_ section: Int) -> Int {
        objectDataSource.numberOfObjectsInSection(section)
    }

    /// The wrapped source's object at `indexPath`, transformed.
    ///
    /// - Parameter indexPath: A section and a row.
    /// - Returns: The transformed object.
    /// - Throws: What the wrapped source or the transform throws.
    public func objectAt(_ indexPath: IndexPath) throws -> ObjectType {
        try transform(objectDataSource.objectAt(indexPath))
    }

    /// The wrapped source's title of `section`.
    ///
    /// - Parameter section: The index of a section.
    /// - Returns: The title, or `nil`.
    public func titleOfSection(_ section: Int) -> String? {
        objectDataSource.titleOfSection(section)
    }
}

/// Not `Sendable`: its transform is a plain closure, as in the seed. Use it from one isolation domain
/// (typically the main actor, like the list view it feeds).
@available(*, unavailable)
extension TransformingObjectDataSource: Sendable {}

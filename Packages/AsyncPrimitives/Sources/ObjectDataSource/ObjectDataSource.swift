public import Foundation

/// An adapter between a list UI and whatever stores the list's objects.
///
/// A table or collection view asks an object data source for its sections, the number of
/// objects in each, and the object at an index path. Implementations wrap an array
/// (``ArrayObjectDataSource``), several other sources (``ConcatenatingObjectDataSource``), an
/// error to show in place of the data (``ErrorObjectDataSource``), or convert another source's
/// objects on access (``TransformingObjectDataSource``).
///
/// Index paths have two elements, section then row (`IndexPath(row:section:)`). An index path
/// that names a section or row the source does not have makes ``objectAt(_:)`` throw an
/// `AsyncPrimitivesError` with code `.indexOutOfRange`; it never traps.
public protocol ObjectDataSource<ObjectType> {
    /// The type of the objects this source provides.
    associatedtype ObjectType

    /// The number of sections.
    ///
    /// - Returns: The number of sections, zero or more.
    func numberOfSections() -> Int

    /// The number of objects in `section`.
    ///
    /// - Parameter section: The index of a section.
    /// - Returns: The number of objects in that section, or zero for a section that does not exist.
    func numberOfObjectsInSection(_ section: Int) -> Int

    /// The object at `indexPath`.
    ///
    /// - Parameter indexPath: A section and a row, as made by `IndexPath(row:section:)`.
    /// - Returns: The object at that position.
    /// - Throws: `AsyncPrimitivesError` with code `.indexOutOfRange` when the source has no such
    ///   position; whatever the underlying store throws otherwise.
    func objectAt(_ indexPath: IndexPath) throws -> ObjectType

    /// The title of `section`, if it has one.
    ///
    /// - Parameter section: The index of a section.
    /// - Returns: The title, or `nil` for an untitled or absent section.
    func titleOfSection(_ section: Int) -> String?
}

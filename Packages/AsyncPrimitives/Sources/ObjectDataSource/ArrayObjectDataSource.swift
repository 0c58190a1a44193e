public import Foundation

/// An object data source over an array: one section holding every object.
///
/// Useful for fixture data and for stores that lack an object data source of their own.
///
/// ```swift
/// let source = ArrayObjectDataSource(objects: ["a", "b"], sectionName: "Letters")
/// try source.objectAt(IndexPath(row: 1, section: 0)) // "b"
/// ```
public struct ArrayObjectDataSource<ObjectType>: ObjectDataSource {
    /// The objects, in row order.
    public let objects: [ObjectType]
    /// The title of the one section, if any.
    public let sectionName: String?

    /// Creates a source with one section holding `objects`.
    ///
    /// - Parameters:
    ///   - objects: The objects, in row order.
    ///   - sectionName: The title of the section.
    public init(objects: [ObjectType], sectionName: String? = nil) {
        self.objects = objects
        self.sectionName = sectionName
    }

    /// Always one section, even when it is empty.
    ///
    /// - Returns: `1`.
    public func numberOfSections() -> Int {
        1
    }

    /// The number of objects in section `0`; zero for any other section.
    ///
    /// - Parameter section: The index of a section.
    /// - Returns: The number of objects in that section.
    public func numberOfObjectsInSection(_ section: Int) -> Int {
        section == 0 ? objects.count : 0
    }

    /// The object at `indexPath`.
    ///
    /// - Parameter indexPath: Section `0` and a row.
    /// - Returns: The object in that row.
    /// - Throws: `AsyncPrimitivesError` with code `.indexOutOfRange` for any other position.
    public func objectAt(_ indexPath: IndexPath) throws -> ObjectType {
        let position = try indexPath.validated(in: self)
        return objects[position.row]
    }

    /// The section name for section `0`; `nil` for any other section.
    ///
    /// - Parameter section: The index of a section.
    /// - Returns: The title of that section.
    public func titleOfSection(_ section: Int) -> String? {
        section == 0 ? sectionName : nil
    }
}

extension ArrayObjectDataSource: Sendable where ObjectType: Sendable {}

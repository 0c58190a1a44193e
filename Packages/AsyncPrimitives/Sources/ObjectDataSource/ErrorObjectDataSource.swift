public import Foundation

/// An object data source with one section holding one object that cannot be read: asking for
/// it throws the source's error.
///
/// A list view can show that one row as the error that kept the real data away.
public struct ErrorObjectDataSource<Object>: ObjectDataSource {
    /// The objects of this source are never produced; it only reports its error.
    public typealias ObjectType = Object

    /// The error thrown for the one object.
    public let error: any Error

    /// Creates a source whose one object throws `error`.
    ///
    /// - Parameter error: The error to throw from ``objectAt(_:)``.
    public init(error: any Error) {
        self.error = error
    }

    /// Always one section.
    ///
    /// - Returns: `1`.
    public func numberOfSections() -> Int {
        1
    }

    /// One object in section `0`; none elsewhere.
    ///
    /// - Parameter section: The index of a section.
    /// - Returns: `1` for section `0`, else `0`.
    public func numberOfObjectsInSection(_ section: Int) -> Int {
        section == 0 ? 1 : 0
    }

    /// Throws the source's error for row `0` of section `0`.
    ///
    /// - Parameter indexPath: Section `0`, row `0`.
    /// - Returns: Never returns.
    /// - Throws: ``error`` for the one object; `AsyncPrimitivesError` with code
    ///   `.indexOutOfRange` for any other position.
    public func objectAt(_ indexPath: IndexPath) throws -> Object {
        _ = try indexPath.validated(in: self)
        throw error
    }

    /// No section has a title.
    ///
    /// - Parameter section: The index of a section.
    /// - Returns: `nil`.
    public func titleOfSection(_ section: Int) -> String? {
        nil
    }
}

extension ErrorObjectDataSource: Sendable {}

public import Foundation

#if !canImport(UIKit)
extension IndexPath {
    /// Creates an index path for a row in a section, as UIKit's initializer does.
    ///
    /// - Parameters:
    ///   - row: The index of the row within its section.
    ///   - section: The index of the section.
    public init(row: Int, section: Int) {
        self.init(indexes: [section, row])
    }

    /// The row: the second element of a two-element index path.
    ///
    /// An index path with fewer than two elements has no row; this property is `-1` then, which
    /// every object data source rejects with a thrown error.
    public var row: Int {
        count > 1 ? self[1] : -1
    }
}
#endif

#if !canImport(UIKit) && !canImport(AppKit)
extension IndexPath {
    /// The section: the first element of the index path.
    ///
    /// An empty index path has no section; this property is `-1` then, which every object
    /// data source rejects with a thrown error.
    public var section: Int {
        count > 0 ? self[0] : -1
    }
}
#endif

extension IndexPath {
    /// Checks that this index path names an existing object of `dataSource`.
    ///
    /// - Returns: The section and row.
    /// - Throws: `AsyncPrimitivesError` with code `.indexOutOfRange` otherwise.
    func validated(in dataSource: some ObjectDataSource) throws -> (section: Int, row: Int) {
        guard count == 2 else {
            throw ObjectDataSourceErrors.indexOutOfRange(self, reason: "an index path for an object has two elements, section and row")
        }
        let section = self[0]
        let row = self[1]
        let sections = dataSource.numberOfSections()
        guard section >= 0, section < sections else {
            throw ObjectDataSourceErrors.indexOutOfRange(self, reason: "section \(section) does not exist; the source has \(sections) section(s)")
        }
        let rows = dataSource.numberOfObjectsInSection(section)
        guard row >= 0, row < rows else {
            throw ObjectDataSourceErrors.indexOutOfRange(self, reason: "row \(row) does not exist; section \(section) has \(rows) object(s)")
        }
        return (section, row)
    }
}

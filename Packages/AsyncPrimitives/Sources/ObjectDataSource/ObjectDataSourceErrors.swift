import AsyncPrimitives
import Foundation

/// The errors object data sources throw.
enum ObjectDataSourceErrors {
    static func indexOutOfRange(_ indexPath: IndexPath, reason: String) -> AsyncPrimitivesError {
        AsyncPrimitivesError(
            code: .indexOutOfRange,
            message: "No object at index path \(Array(indexPath)): \(reason). "
                + "Ask numberOfSections() and numberOfObjectsInSection(_:) before objectAt(_:)."
        )
    }
}

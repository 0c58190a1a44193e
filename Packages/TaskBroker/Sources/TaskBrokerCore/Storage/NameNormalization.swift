import Foundation

package extension String {
    /// The name in Unicode Normalization Form C, the one spelling under which TaskBroker stores
    /// and looks up queue names, keys and collections. Swift compares strings by canonical
    /// equivalence ("café" with a precomposed é equals "café" with e and a combining accent),
    /// SQLite and PostgreSQL compare them by their bytes: without one spelling, two spellings of
    /// one name were one queue to a broker and two to the database, and the actions stored under
    /// the spelling the broker did not read never ran. ASCII, the common case, is returned as is.
    var normalizedName: String {
        utf8.allSatisfy { $0 < 0x80 } ? self : precomposedStringWithCanonicalMapping
    }
}

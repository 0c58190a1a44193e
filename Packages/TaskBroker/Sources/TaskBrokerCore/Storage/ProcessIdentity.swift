import Foundation
import Synchronization

/// Identifies this process among those that share a database: a random token drawn once.
package enum ProcessIdentity {
    /// The token, random per process (a process id can be reused after a crash; this cannot).
    package static let token: String = UUID().uuidString

    private static let brokers = Atomic<UInt64>(0)

    /// A name no other broker of any process ever has: two brokers of the same name on different
    /// `TaskDatabase`s of this process are different lease holders.
    package static func owner(brokerName: String) -> String {
        "\(brokerName)#\(brokers.add(1, ordering: .relaxed).newValue)@\(token)"
    }
}

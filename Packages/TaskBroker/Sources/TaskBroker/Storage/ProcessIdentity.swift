import Foundation

/// Identifies this process among those that share a database: a random token drawn once.
enum ProcessIdentity {
    /// The token, random per process (a process id can be reused after a crash; this cannot).
    static let token: String = UUID().uuidString
}

import TaskBrokerCore
import Testing

extension TaskStorage {
    /// Claims `heads` for `owner` and returns the epoch each was granted under; fails the test
    /// unless every claim is granted.
    func claimGranted(
        _ heads: [StoredTask], owner: String, leaseDuration: Duration = .seconds(30), sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> [Int64] {
        let results = try await claim(heads, owner: owner, leaseDuration: leaseDuration)
        let epochs = results.compactMap(\.grantedEpoch)
        try #require(epochs.count == heads.count, "every head is granted: \(results)", sourceLocation: sourceLocation)
        return epochs
    }
}

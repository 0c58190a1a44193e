import PostgresNIO
import Synchronization

/// Tells the operation under way on a pooled connection that the connection closed (a server
/// restart or failover, `pg_terminate_backend`, a reset), so that the operation ends at once
/// instead of waiting for its time limit (see `PostgresTaskStorage.withConnection(within:on:_:)`).
///
/// Each connection gets one close callback, the first time an operation runs on it, and each
/// operation only swaps the handler it holds: a callback per operation would stay registered on
/// the connection's close future until the connection closes, piling up one per operation on a
/// busy connection.
final class ClosingConnections: Sendable {
    private final class Slot: Sendable {
        /// Whether the connection closed, and the handler of the operation under way on it.
        let state = Mutex<(closed: Bool, handler: (@Sendable () -> Void)?)>((false, nil))

        func closed() {
            let handler = state.withLock { state -> (@Sendable () -> Void)? in
                state.closed = true
                defer { state.handler = nil }
                return state.handler
            }
            handler?()
        }

        /// Sets the handler of the operation under way (`nil`: none); a handler set on a closed
        /// connection runs at once.
        func set(_ handler: (@Sendable () -> Void)?) {
            let runNow = state.withLock { state -> Bool in
                guard !state.closed else { return handler != nil }
                state.handler = handler
                return false
            }
            if runNow { handler?() }
        }
    }

    private let slots = Mutex<[ObjectIdentifier: Slot]>([:])

    /// Calls `onClose` once if `connection` closes (or has closed) before the returned function is
    /// called, which the operation calls when it is done with the connection.
    func watch(_ connection: PostgresConnection, onClose: @escaping @Sendable () -> Void) -> @Sendable () -> Void {
        let id = ObjectIdentifier(connection)
        let (slot, isNew) = slots.withLock { slots -> (Slot, Bool) in
            if let slot = slots[id] { return (slot, false) }
            let slot = Slot()
            slots[id] = slot
            return (slot, true)
        }
        if isNew {
            connection.closeFuture.whenComplete { [weak self] _ in
                _ = self?.slots.withLock { $0.removeValue(forKey: id) }
                slot.closed()
            }
        }
        slot.set(onClose)
        return { slot.set(nil) }
    }
}

import Foundation

// The driver's state, outside the generic engine: concrete types keep the hot paths free of
// generic metadata look-ups and value-witness calls.

enum BrokerSignal: Sendable {
    case changes([TaskChange])
    case committed([BrokerFinished], succeeded: Bool)
    case loaded(queueName: String, entries: [BrokerEntry]?)
    case timer(queueName: String, token: UInt64)
    case stop
    case abandon
}

struct BrokerEntry: Sendable {
    var task: StoredTask
    /// The decoded action, or `nil` when the payload does not decode as the handler's type.
    var action: (any BrokerActionBox)?
    var since: Duration
}

struct BrokerQueueState {
    /// Runnable actions in run order, from `head` on.
    var entries: [BrokerEntry] = []
    var head = 0
    /// The sticky head: an action that failed runs again before anything else.
    var held: BrokerEntry?
    var inFlight: StoredTask?
    var timer: (token: UInt64, task: Task<Void, Never>)?

    var isEmpty: Bool { held == nil && head == entries.count }
    var count: Int { entries.count - head + (held == nil ? 0 : 1) }
}

/// Everything the driver task owns.
struct BrokerDriver {
    var queues: [String: BrokerQueueState] = [:]
    var ignored: Set<String> = []
    var ready: [String] = []
    var readySet: Set<String> = []
    /// Queues that have an action reserved, claimed, running or being committed.
    var running = 0
    var stopping = false
    /// Queues being read at startup, and those changed while they were read.
    var loading: Set<String> = []
    var dirtyWhileLoading: Set<String> = []

    var isIdle: Bool { running == 0 }
    var nextTimerToken: UInt64 = 0
    /// Which queue holds each action this broker knows of.
    var locations: [BrokerActionID: String] = [:]
    let decoder = JSONDecoder()
}

/// A decoded action, type-erased so that the driver's state is not generic.
protocol BrokerActionBox: AnyObject, Sendable {
    /// Orders two actions of one queue (`sort`); both boxes come from the same engine.
    func order(before other: any BrokerActionBox) -> ComparisonResult
}

/// The box of an action of type `Action`.
final class TypedActionBox<Action: TaskQueueAction>: BrokerActionBox {
    let value: Action

    init(_ value: Action) {
        self.value = value
    }

    func order(before other: any BrokerActionBox) -> ComparisonResult {
        guard let other = other as? TypedActionBox<Action> else { return .orderedSame }
        return value.sort(other.value)
    }
}

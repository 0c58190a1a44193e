import Dispatch

/// Holds a target without keeping it alive.
final class WeakTarget: Sendable {
    weak let object: (any AnyObject & Sendable)?

    init(_ object: any AnyObject & Sendable) {
        self.object = object
    }
}

/// The process-wide registrations shared by every job: custom queues, targets and actions.
final class Registry: Sendable {
    private struct State {
        var lanes: [String: TagLane] = [:]
        var targets: [WeakTarget] = []
        var actions: [Action] = []
    }

    static let shared = Registry()

    private let state = Locked(State())

    /// Adds a lane for `tag`; returns `false` (and changes nothing) when the tag exists.
    func addQueue(tag: String, priority: DispatchQoS.QoSClass) -> Bool {
        state.withLock { state in
            if state.lanes[tag] != nil { return false }
            state.lanes[tag] = TagLane(tag: tag, priority: priority)
            return true
        }
    }

    /// Removes the lane for `tag`; returns whether there was one.
    func removeQueue(tag: String) -> Bool {
        state.withLock { $0.lanes.removeValue(forKey: tag) != nil }
    }

    func lane(tag: String) -> TagLane? {
        state.withLock { $0.lanes[tag] }
    }

    func addTarget(_ target: any AnyObject & Sendable) {
        state.withLock { state in
            state.targets.removeAll { $0.object == nil }
            if !state.targets.contains(where: { $0.object === target }) {
                state.targets.append(WeakTarget(target))
            }
        }
    }

    func removeTarget(_ target: any AnyObject & Sendable) {
        state.withLock { state in
            state.targets.removeAll { $0.object == nil || $0.object === target }
        }
    }

    /// The live registered targets of type `Target`, in registration order, held weakly.
    func targets<Target: AnyObject & Sendable>(of type: Target.Type) -> [WeakTarget] {
        state.withLock { state in
            state.targets.filter { $0.object is Target }
        }
    }

    func addAction(_ action: Action) {
        state.withLock { state in
            if !state.actions.contains(where: { $0 === action }) {
                state.actions.append(action)
            }
        }
    }

    func removeAction(_ action: Action) {
        state.withLock { state in
            state.actions.removeAll { $0 === action }
        }
    }

    /// The registered actions that handle `event`, in registration order.
    func actions(for event: any Sendable) -> [Action] {
        state.withLock { state in
            state.actions.filter { $0.handles(event) }
        }
    }
}

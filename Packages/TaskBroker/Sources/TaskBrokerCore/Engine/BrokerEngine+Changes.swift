import Foundation

// Committed changes, from the database's notifier to the state machine.
extension BrokerEngine {
    /// Hands committed changes to the broker (a listener of the database's notifier).
    ///
    /// A listener runs on the thread that announces the commit: on SQLite, GRDB's writer queue,
    /// inside the save's commit hook, which every other write of the file waits for. So it runs
    /// no user code: it wakes the plain parallel lane (by queue name) and posts the changes as
    /// they are; the broker's own task decodes their actions (``decodingCommitted(_:)``).
    func apply(_ changes: [TaskChange]) {
        var wakesLane = false
        var posted: [TaskChange] = []
        posted.reserveCapacity(changes.count)
        for change in changes {
            switch change {
            case .parallelReady(let queueNames):
                // An empty name: queues a notification could not name.
                wakesLane = wakesLane || queueNames.contains { $0.isEmpty || claimFilter($0) }
                continue
            case .external(let queueNames) where !storage.isShared:
                // SQLite: another process's saves into this file, and queues an operator resumed,
                // may hold plain parallel actions (the change journal names queues, not what
                // changed in them). A shared backend reports those as `.parallelReady`, so that
                // its queues' every change does not cost a claim.
                wakesLane = wakesLane || queueNames.contains(where: claimFilter)
            case .externalEverywhere:
                wakesLane = true
            case .touched:
                continue
            case .spareCapacity(let pool, _) where pool != name:
                continue
            default:
                break
            }
            posted.append(change)
        }
        if wakesLane { lane?.wake() }
        if !posted.isEmpty { mailbox.post(.committed(posted, heardAt: time.elapsed())) }
    }

    /// The inputs with each `committed` (as `apply(_:)` filtered it) replaced by the machine's
    /// `changes`, their saved actions decoded as the handler's type (an action that does not decode is kept undecoded: the
    /// machine pauses it when it comes to run).
    func decodingCommitted(_ inputs: [BrokerStateMachine.Input]) -> [BrokerStateMachine.Input] {
        guard inputs.contains(where: { if case .committed = $0 { true } else { false } }) else { return inputs }
        let decoder = JSONDecoder()
        return inputs.map { input in
            guard case .committed(let changes, let heardAt) = input else { return input }
            return .changes(changes.compactMap { change in Self.brokerChange(change, heardAt: heardAt, decoder: decoder) })
        }
    }

    /// What a committed change that `apply(_:)` posted means to the state machine (`nil`: the
    /// changes it does not post).
    private static func brokerChange(_ change: TaskChange, heardAt: Duration, decoder: JSONDecoder) -> BrokerChange? {
        switch change {
        case .saved(let task):
            let action = try? decoder.decode(Handler.Action.self, from: task.payload)
            return .saved(BrokerEntry(task: task, action: action.map { TypedActionBox($0) }, since: heardAt))
        case .deleted(let task):
            return .deleted(task)
        case .completed(let task):
            return .completed(task)
        case .resumed(let queueNames, _):
            return .resumed(queueNames)
        case .purged(let queueName):
            return .purged(queueName)
        case .external(let queueNames):
            return .reload(queueNames)
        case .externalEverywhere(let storedQueues):
            return .reloadEverything(storedQueues)
        case .unowned(let queueNames):
            return .unowned(queueNames)
        case .spareCapacity(_, let room):
            return .spareCapacityElsewhere(room: room)
        case .parallelReady, .touched:
            return nil
        }
    }
}

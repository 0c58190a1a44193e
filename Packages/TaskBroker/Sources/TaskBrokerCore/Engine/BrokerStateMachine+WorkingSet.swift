import Foundation

// What the broker holds of the stored queues: a working set of queues (listed a page at a time,
// read as it has room) and, per queue, a read-ahead of its actions (read on before it runs out).
extension BrokerStateMachine {
    // MARK: - The working set

    /// Queues read for the first time plus queues ready and waiting for a slot.
    var workingSetCount: Int { firstReads.count + ready.count }

    /// Reads queues of `unread` while the working set has room: from half empty up to full, so
    /// that a read covers many queues at once.
    mutating func readUnread() {
        guard unreadHead < unread.count, workingSetCount <= configuration.workingSet / 2 else { return }
        while unreadHead < unread.count, workingSetCount < configuration.workingSet {
            let queueName = unread[unreadHead]
            unreadHead += 1
            unreadSet.remove(queueName)
            if queues[queueName] == nil { startFirstRead(queueName) }
        }
        if unreadHead == unread.count {
            unread = []
            unreadHead = 0
        } else if unreadHead > 1024, unreadHead * 2 > unread.count {
            unread.removeFirst(unreadHead)
            unreadHead = 0
        }
    }

    /// Reads a queue the broker does not hold now, or, when the working set is full or queues
    /// learned of earlier still wait, puts it at the back of `unread`.
    mutating func learned(_ queueName: String) {
        guard !unreadSet.contains(queueName) else { return }
        if unreadHead == unread.count, workingSetCount < configuration.workingSet {
            startFirstRead(queueName)
        } else {
            unread.append(queueName)
            unreadSet.insert(queueName)
        }
    }

    mutating func startFirstRead(_ queueName: String) {
        var fresh = Queue(load: Queue.Load())
        fresh.loadedThrough = forgottenThrough
        queues[queueName] = fresh
        firstReads.insert(queueName)
        loadsToIssue.append(queueName)
    }

    // MARK: - Reading ahead

    /// Asks for the next actions of a queue read only in part once few of its actions are left to run.
    mutating func readAheadIfLow(_ state: inout Queue, _ queueName: String) {
        guard phase == .running, state.truncated, state.append == nil, state.load == nil,
              state.waiting.count - state.head <= configuration.readsAheadBelow else { return }
        nextToken += 1
        state.append = Queue.Append(token: nextToken)
        readAheadsToIssue.append(ReadAheadRequest(queueName: queueName, after: state.readThrough, token: nextToken))
    }

    /// A read ahead answered: its actions join the queue after those it holds, except those deleted,
    /// moved away or already known meanwhile; then the saves heard meanwhile are applied.
    mutating func readAhead(_ queueName: String, _ entries: [BrokerEntry], token: UInt64, truncated: Bool, into out: inout [Output]) {
        guard var state = queues.removeValue(forKey: queueName) else { return }
        guard let append = state.append, append.token == token, state.load == nil else {
            queues[queueName] = state
            return
        }
        state.append = nil
        var last = state.readThrough
        for entry in entries where entry.task.position > state.readThrough {
            last = max(last, entry.task.position)
            let id = entry.id
            if append.deleted.contains(id) { continue }
            if let other = locations[id] {
                // Known here already (saved meanwhile), or in another queue: kept if newer there.
                if other == queueName { continue }
                if let known = knownRevision(of: id), known >= entry.task.revision { continue }
                removeEntry(id, revision: nil, into: &out)
            }
            state.waiting.append(entry)
            locations[id] = queueName
        }
        state.readThrough = last
        state.truncated = truncated
        queues[queueName] = state
        for entry in append.saved {
            saved(entry, into: &out)
        }
        if var state = queues.removeValue(forKey: queueName) {
            readAheadIfLow(&state, queueName)
            queues[queueName] = state
        }
        markReady(queueName)
    }
}

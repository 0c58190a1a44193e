import Foundation
import Tracing
import Logging
import Synchronization

// The engine's storage operations: each runs in a task of the engine's group and answers the
// machine through the mailbox.
extension BrokerEngine {
    // MARK: - Storage

    /// How many actions of a queue a read returns: the read-ahead, or all of them for a type with
    /// its own `sort(_:)`.
    var readLimit: Int? {
        ordersBySort.withLock { $0 } == true ? nil : max(1, configuration.readAhead)
    }

    /// Decodes a queue's actions; notes the first time whether the action type has its own `sort(_:)`.
    func decode(_ tasks: [StoredTask], since: Duration) -> [BrokerEntry] {
        let entries = BrokerEntry.decode(tasks, as: Handler.Action.self, since: since)
        if ordersBySort.withLock({ $0 }) == nil,
           let action = entries.lazy.compactMap({ $0.action as? TypedActionBox<Handler.Action> }).first {
            let custom = action.value.ordersBySort
            ordersBySort.withLock { $0 = custom }
        }
        return entries
    }

    /// Asks storage for `count` starts of a rate limit's bucket, at this broker's wall-clock time
    /// (a shared backend counts by its own clock).
    func acquireStarts(_ key: String, limit: TaskRateLimit, count: Int) async {
        do {
            let grant = try await storage.acquireStarts(
                bucket: key, limit: limit.starts, period: limit.period, count: count, now: time.now()
            )
            mailbox.post(.startsGranted(key, granted: grant.granted, retryAfter: grant.retryAfter, at: grant.at))
        } catch {
            mailbox.post(.startsFailed(key, message: "\(error)"))
        }
    }

    /// Gives back starts that did not happen (a claim refused, a queue that could not use its
    /// start). A failure only leaves them counted: the limit is kept, a start is lost.
    func releaseStarts(_ key: String, at: Date, count: Int) async {
        do {
            try await storage.releaseStarts(bucket: key, at: at, count: count)
        } catch {
            logger.debug("could not give back starts of a rate limit", metadata: ["bucket": "\(key)", "count": "\(count)", "error": "\(error)"])
        }
    }

    /// Reads queues; a shared backend's lease-aware read also takes the lease of up to
    /// `claimBudget` of them (their heads then start without a claim of their own).
    func load(_ queueNames: [String], claimBudget: Int = 0) async {
        let since = time.elapsed()
        let mailbox = self.mailbox
        let limit = readLimit
        // Queues read only in part, before the read showed that the type has its own `sort`: read whole after.
        let readWhole = Mutex<[String]>([])
        // A shared backend's lease-aware read also says which queues are paused (one round trip,
        // one snapshot); other reads need them looked up first.
        let leaseAware = batchReader == nil && limit != nil ? storage as? any LeaseAwareReads : nil
        // Looked up before the actions: a pause or resume committed after it reaches the broker as a
        // change, which reads the queue again.
        let paused: Set<String>
        if leaseAware == nil {
            do {
                paused = try await storage.pausedQueues(among: queueNames)
            } catch {
                mailbox.post(.loadFailed(queueNames, message: "\(error)"))
                return
            }
        } else {
            paused = []
        }
        if let batchReader {
            // One scan for all the queues; each is posted as soon as it is read and decoded.
            let unreported = Mutex(Set(queueNames))
            do {
                try await batchReader.readQueues(queueNames, after: [:], limit: limit, failed: { queueName, error in
                    // A row of it does not decode: only this queue waits (and is read again).
                    unreported.withLock { _ = $0.remove(queueName) }
                    mailbox.post(.loadFailed([queueName], message: "\(error)"))
                }) { queueName, tasks in
                    unreported.withLock { _ = $0.remove(queueName) }
                    let entries = self.decode(tasks, since: since)
                    let truncated = limit.map { tasks.count >= $0 } ?? false
                    if truncated, self.readLimit == nil {
                        readWhole.withLock { $0.append(queueName) }
                        return
                    }
                    mailbox.post(.loaded(
                        [queueName: entries], requested: [queueName], truncated: truncated ? [queueName] : [],
                        paused: paused.contains(queueName) ? [queueName] : []
                    ))
                }
                let empty = unreported.withLock { Array($0) }
                if !empty.isEmpty { mailbox.post(.loaded([:], requested: empty, paused: paused)) }
            } catch {
                mailbox.post(.loadFailed(unreported.withLock { Array($0) }.sorted(), message: "\(error)"))
            }
        } else {
            // Other backends: 256 queues a read, the first only 32: its queues start as soon as it
            // is decoded, and a first read of 256 queues of 100 actions held up the whole start (~75 ms).
            var start = 0
            // What is left of the budget of leases the reads may take.
            var budget = claimBudget
            while start < queueNames.count {
                let chunk = Array(queueNames[start..<min(start + (start == 0 ? 32 : 256), queueNames.count)])
                start += chunk.count
                do {
                    // A shared backend reads only the head of a queue another worker holds: it
                    // waits for that lease (or for the queue to change) before its head is
                    // claimed, and the rest is read once the queue is this broker's (its first
                    // run reads ahead).
                    var heldElsewhere: [String: Date] = [:]
                    var claimed: [String: Int64] = [:]
                    var chunkPaused = paused
                    let byQueue: [String: [StoredTask]]
                    if let limit, let leaseAware {
                        // Only for an action type known to keep enqueue order: the read checks that
                        // the first action by position is still stored, and one with its own `sort`
                        // may run another first.
                        let read = try await leaseAware.tasks(
                            inQueues: chunk, limit: limit, readingFor: owner, claimBudget: ordersBySort.withLock { $0 } == false ? budget : 0,
                            leaseDuration: leaseDuration, now: time.now()
                        )
                        byQueue = read.tasks
                        heldElsewhere = read.heldElsewhere
                        chunkPaused = read.paused
                        claimed = read.claimed
                        budget -= read.claimed.count
                    } else if let limit {
                        byQueue = try await storage.tasks(inQueues: chunk, limit: limit)
                    } else {
                        byQueue = try await storage.tasks(inQueues: chunk)
                    }
                    var entries: [String: [BrokerEntry]] = [:]
                    var truncated: Set<String> = []
                    for (queueName, tasks) in byQueue {
                        entries[queueName] = decode(tasks, since: since)
                        if let limit, tasks.count >= limit || heldElsewhere[queueName] != nil { truncated.insert(queueName) }
                    }
                    if !truncated.isEmpty, readLimit == nil {
                        readWhole.withLock { $0.append(contentsOf: truncated) }
                        for queueName in truncated { entries[queueName] = nil }
                        // A lease taken for a queue read again whole is not among the requested:
                        // the machine lets it go.
                        mailbox.post(.loaded(
                            entries, requested: chunk.filter { !truncated.contains($0) }, paused: chunkPaused, claimed: claimed, sentAt: since
                        ))
                    } else {
                        mailbox.post(.loaded(
                            entries, requested: chunk, truncated: truncated, paused: chunkPaused, heldElsewhere: heldElsewhere,
                            claimed: claimed, sentAt: since
                        ))
                    }
                } catch {
                    mailbox.post(.loadFailed(chunk, message: "\(error)"))
                }
            }
        }
        let again = readWhole.withLock { $0 }
        if !again.isEmpty { await load(again.sorted()) }
    }

    /// The order in which the broker reads a page of listed queue names: on a shared backend, the
    /// page turned by a random offset (see ``QueueReadingOrder``).
    func readingOrder(_ page: [String]) -> [String] {
        QueueReadingOrder.of(page, shared: storage.isShared, offset: page.isEmpty ? 0 : Int.random(in: 0..<page.count))
    }

    /// Lists the next page of stored queue names that the broker's filter accepts.
    func listQueues(after name: String) async {
        do {
            let page = try await storage.queueNames(after: name, limit: Self.queueNamesPerPage)
            mailbox.post(.listed(readingOrder(page.filter(claimFilter)), next: page.count >= Self.queueNamesPerPage ? page.last : nil))
        } catch {
            mailbox.post(.listFailed(message: "\(error)"))
        }
    }

    /// Reads a page of the schedule, and when it was the last one, the next time to wake up.
    func findScheduled(after cursor: TaskScheduleEntry, through: Date) async {
        do {
            let page = try await storage.scheduled(after: cursor, through: through, limit: Self.scheduledPerPage)
            let complete = page.count < Self.scheduledPerPage
            let next = complete ? try await storage.nextNotBefore(after: through) : nil
            var names: [String] = []
            var seen: Set<String> = []
            for entry in page where claimFilter(entry.queueName) && seen.insert(entry.queueName).inserted {
                names.append(entry.queueName)
            }
            mailbox.post(.scheduled(names, last: page.last, through: through, next: next, complete: complete))
        } catch {
            mailbox.post(.scheduleFailed(message: "\(error)"))
        }
    }

    /// Reads the next actions of queues read only in part (`readAhead`); a queue whose rows do
    /// not decode fails alone, and is read again once it runs out (a failure reported then).
    func readAhead(_ requests: [BrokerStateMachine.ReadAheadRequest]) async {
        let since = time.elapsed()
        let limit = max(1, configuration.readAhead)
        let names = requests.map(\.queueName)
        let positions = Dictionary(requests.map { ($0.queueName, $0.after) }, uniquingKeysWith: { first, _ in first })
        var tokens = Dictionary(requests.map { ($0.queueName, $0.token) }, uniquingKeysWith: { first, _ in first })
        do {
            var byQueue: [String: [StoredTask]]
            if let batchReader {
                let read = Mutex<(tasks: [String: [StoredTask]], failed: Set<String>)>(([:], []))
                try await batchReader.readQueues(names, after: positions, limit: limit, failed: { queueName, _ in
                    read.withLock { _ = $0.failed.insert(queueName) }
                }) { queueName, tasks in
                    read.withLock { $0.tasks[queueName] = tasks }
                }
                let failed: Set<String>
                (byQueue, failed) = read.withLock { ($0.tasks, $0.failed) }
                if !failed.isEmpty {
                    mailbox.post(.readAheadFailed(tokens.filter { failed.contains($0.key) }))
                    for queueName in failed { tokens[queueName] = nil }
                }
            } else {
                byQueue = try await storage.tasks(inQueues: names, after: positions, limit: limit)
            }
            var entries: [String: [BrokerEntry]] = [:]
            var truncated: Set<String> = []
            for (queueName, tasks) in byQueue where tokens[queueName] != nil {
                entries[queueName] = decode(tasks, since: since)
                if tasks.count >= limit { truncated.insert(queueName) }
            }
            mailbox.post(.readAhead(entries, tokens: tokens, truncated: truncated))
        } catch {
            mailbox.post(.readAheadFailed(tokens))
        }
    }

    func claim(_ heads: [StoredTask]) async {
        await withSpan("TaskBroker claim") { span in
            span.attributes["taskbroker.count"] = heads.count
            TraceCarrier.link(span, to: heads)
            do {
                let sentAt = time.elapsed()
                let results = try await storage.claim(heads, owner: owner, leaseDuration: leaseDuration)
                mailbox.post(.claimed(heads, results: results, sentAt: sentAt))
            } catch {
                span.recordError(error)
                mailbox.post(.claimFailed(heads, message: "\(error)"))
            }
        }
    }

    /// Waits for the leases let go as the broker stopped to be released, so that `shutdown()`
    /// returns with them free, but no longer than `limit` (real time: a database that stopped
    /// answering must not hold the shutdown; the leases then expire as usual).
    static func finish(_ releases: [Task<Void, Never>], within limit: Duration) async {
        guard !releases.isEmpty else { return }
        // Not a task group: it would wait for a release that hangs (awaiting a task's value does
        // not end when the waiter is cancelled).
        let (done, signal) = AsyncStream<Void>.makeStream()
        // Ends with the releases (cancelled below when they overrun), so it outlives the broker by no more.
        Task {
            for release in releases {
                await release.value
            }
            signal.yield()
        }
        let timer = Task {
            try? await Task.sleep(for: limit)
            signal.yield()
        }
        for await _ in done { break }
        timer.cancel()
        for release in releases {
            release.cancel()
        }
    }

    /// Lets go of leases the machine will not use (claimed or kept as the broker stopped, or
    /// extended by a renewal after their outcome released them).
    func release(_ leases: [TaskQueueLease]) async {
        let queueNames = leases.map(\.queueName)
        do {
            try await storage.release(leases, owner: owner)
            logger.debug("let go of the leases of \(leases.count) queue(s) it will not run (\(Self.summary(queueNames)))")
        } catch {
            logger.warning("could not let go of the leases of \(leases.count) queue(s) it will not run (\(Self.summary(queueNames))); other workers take them over when the leases expire: \(error)")
        }
    }

    func announceSpareCapacity(room: Int) async {
        do {
            try await storage.announceSpareCapacity(pool: name, room: room)
            logger.debug("has room for \(room) more queue(s): asked the pool's other workers to let queues go")
        } catch {
            // The machine asks again at its next refused claim, once its pause between asks ends.
            logger.debug("could not ask the pool's other workers to let queues go: \(error)")
        }
    }

    /// Renews the leases the machine names (those of queues whose action runs; it asks every third
    /// of the lease, counted from the start of each renewal, and a twelfth of the lease after one
    /// that failed), and tells the machine how long it took and which leases storage no longer
    /// holds for this broker (the machine decides which of those were lost: a queue it still
    /// holds under that epoch, whose action's outcome will be refused).
    func renew(_ leases: [TaskQueueLease]) async {
        // Real time, not the injected clock: a lease expires on the database server's clock.
        let clock = ContinuousClock()
        let began = clock.now
        do {
            let lost = try await storage.renew(leases, owner: owner, leaseDuration: leaseDuration)
            if !lost.isEmpty {
                logger.debug("\(lost.count) lease(s) it renewed are no longer its own (\(Self.summary(lost.map(\.queueName))))")
            }
            mailbox.post(.renewed(lost: lost, sent: leases, took: clock.now - began))
        } catch {
            logger.error("could not renew the leases of \(leases.count) running queue(s); trying again in \(leaseDuration / 12): \(error)")
            mailbox.post(.renewFailed)
        }
    }
}

/// The order in which a broker reads a page of listed queue names.
enum QueueReadingOrder {
    /// On a shared backend, the page turned to start at `offset` (name order from there, then from
    /// the page's start): workers started together then read and claim different queues first,
    /// instead of all reading the same ones and all but one having their claims refused (reads
    /// and claims that cost the CPU the workers and the database share). Alone on its store
    /// (SQLite), a broker reads them in name order.
    static func of(_ page: [String], shared: Bool, offset: Int) -> [String] {
        guard shared, page.count > 1 else { return page }
        let start = ((offset % page.count) + page.count) % page.count
        return Array(page[start...] + page[..<start])
    }
}

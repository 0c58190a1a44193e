import Foundation
import TaskBrokerCore

/// The payload of one change notification: queues whose actions changed (`q`), queues among them
/// whose pauses a restart cleared (`r`; listeners that know no `r` read them again), actions that
/// completed (`c`: queue, collection, key, revision), `a` when listeners should read everything,
/// `w`, the name of a pool one of whose workers has room for `n` more queues, or `p`: queues whose
/// plain parallel actions were saved or made ready (listeners that know no `p` ignore it).
/// A finish's notifications begin with the sending storage's origin (`"o"`, see
/// ``originPrefix(_:)``), so that its own change feed skips them unread (it delivers the same
/// changes in process); other storages' feeds decode them and ignore the key.
///
/// PostgreSQL limits a payload to 8,000 bytes, so a transaction that changes many queues sends
/// several notifications of at most ~7,000 bytes; an entry too long for one becomes `a`.
struct ChangeMessage: Codable, Equatable {
    var q: [String]?
    var r: [String]?
    var c: [[String]]?
    var a: Bool?
    var w: String?
    var n: Int?
    var p: [String]?

    static let limit = 7_000

    /// How a notification from `origin` begins: `{"o":"<origin>",`. The origin is a token of
    /// letters and digits (no JSON escaping needed).
    static func originPrefix(_ origin: String) -> String {
        #"{"o":"\#(origin)","#
    }

    /// The notification that a worker of `pool` has room for `room` more queues, from the storage
    /// `origin` (its own feed skips it); `nil` for a pool name too long for one.
    static func spareCapacity(pool: String, room: Int, origin: String) -> String? {
        guard encodedLength(pool) < limit, let data = try? JSONEncoder().encode(pool) else { return nil }
        return originPrefix(origin) + #""w":"# + String(decoding: data, as: UTF8.self) + #","n":\#(room)}"#
    }

    /// The notifications that plain parallel actions of these queues are ready.
    static func parallel(_ queueNames: [String]) -> [String] {
        var payloads: [String] = []
        var current: [String] = []
        var size = 0
        var everything = false
        func flush() {
            if !current.isEmpty, let data = try? JSONEncoder().encode(ChangeMessage(p: current)) {
                payloads.append(String(decoding: data, as: UTF8.self))
            }
            current = []
            size = 0
        }
        for name in queueNames {
            let cost = encodedLength(name)
            guard cost < limit else { everything = true; continue }
            if size + cost > limit { flush() }
            current.append(name)
            size += cost
        }
        flush()
        // A name too long for a notification: every broker tries a claim.
        if everything { payloads.append(#"{"p":[""]}"#) }
        return payloads
    }

    /// The notifications of one transaction.
    static func chunks(queues: [String], completed: [[String]] = [], resumed: Bool = false) -> [String] {
        var payloads: [String] = []
        var current = ChangeMessage()
        var size = 0
        func flush() {
            if current != ChangeMessage(), let data = try? JSONEncoder().encode(current) {
                payloads.append(String(decoding: data, as: UTF8.self))
            }
            current = ChangeMessage()
            size = 0
        }
        var everything = false
        for name in queues {
            let cost = encodedLength(name)
            guard cost < limit else { everything = true; continue }
            let entryCost = resumed ? 2 * cost : cost
            if size + entryCost > limit { flush() }
            current.q = (current.q ?? []) + [name]
            if resumed { current.r = (current.r ?? []) + [name] }
            size += entryCost
        }
        for entry in completed {
            let cost = entry.reduce(6) { $0 + encodedLength($1) }
            guard cost < limit else {
                everything = true
                continue
            }
            if size + cost > limit { flush() }
            current.c = (current.c ?? []) + [entry]
            size += cost
        }
        flush()
        if everything { payloads.append(#"{"a":true}"#) }
        return payloads
    }

    /// The most bytes a string takes in the payload's JSON: quoted, escaped and followed by a comma.
    /// A control character is escaped as `\u00XX`, six times its length: estimated as twice the
    /// length before, a queue name of 1,500 of them made a notification of ~9,000 bytes, which
    /// PostgreSQL refused, and with it the save.
    static func encodedLength(_ string: String) -> Int {
        var length = 3
        for byte in string.utf8 {
            switch byte {
            case 0x00..<0x20: length += 6
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): length += 2
            default: length += 1
            }
        }
        return length
    }

    /// What a notification means to the brokers; `nil` when they should read every queue.
    func changes() -> [TaskStorageChange]? {
        if a == true { return nil }
        var changes: [TaskStorageChange] = []
        if let w { changes.append(.spareCapacity(pool: w, room: max(n ?? 1, 1))) }
        if let p, !p.isEmpty { changes.append(.parallelReady(p)) }
        // Resumed first: the broker clears the pause it knows and reports it, then reads the queue.
        if let r, !r.isEmpty { changes.append(.queuesResumed(r)) }
        if let q, !q.isEmpty { changes.append(.queuesChanged(q)) }
        if let c {
            let tasks = c.compactMap { entry -> StoredTask? in
                guard entry.count == 4, let revision = Int64(entry[3]) else { return nil }
                return StoredTask(key: entry[2], collection: entry[1], queueName: entry[0], payload: Data(), position: 0, revision: revision)
            }
            if tasks.count < c.count { return nil }
            if !tasks.isEmpty { changes.append(.completed(tasks)) }
        }
        return changes
    }
}

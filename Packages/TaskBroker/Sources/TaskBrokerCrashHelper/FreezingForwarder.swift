#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TCP forwarder on loopback that freezes: it passes bytes both ways between its clients and
/// an upstream server until a client sends `pattern`; it forwards that chunk, then stops moving
/// any byte of any connection, both ways, and keeps every socket open. To both ends that is a
/// network cut without a word (a machine that lost power, a cable pulled): no FIN, no RST, no
/// answer. The tests use it to cut a worker off from PostgreSQL right after the server ran a
/// statement of the worker's transaction and before the worker's COMMIT could reach it.
///
/// One thread, `poll(2)`: the test helper needs nothing faster.
struct FreezingForwarder {
    let upstreamPort: UInt16
    let pattern: [UInt8]

    /// A connection: the client's socket, the upstream socket, and the last bytes the client
    /// sent (a pattern split across two reads is still found).
    private struct Pair {
        var client: Int32
        var upstream: Int32
        var tail: [UInt8] = []
    }

    /// Binds 127.0.0.1 on a free port; returns the listening socket and the port.
    static func listen() -> (socket: Int32, port: UInt16)? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, Glibc.listen(fd, 64) == 0 else { return nil }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { return nil }
        return (fd, UInt16(bigEndian: address.sin_port))
    }

    /// Forwards until the pattern passes, then calls `frozen` and returns (the sockets stay open).
    func run(listening listener: Int32, frozen: () -> Void) {
        var pairs: [Pair] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            var descriptors = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0)]
            for pair in pairs {
                descriptors.append(pollfd(fd: pair.client, events: Int16(POLLIN), revents: 0))
                descriptors.append(pollfd(fd: pair.upstream, events: Int16(POLLIN), revents: 0))
            }
            guard poll(&descriptors, nfds_t(descriptors.count), -1) > 0 else { continue }
            let polled = pairs.count
            if descriptors[0].revents & Int16(POLLIN) != 0 {
                let client = accept(listener, nil, nil)
                if client >= 0 {
                    if let upstream = connectUpstream() {
                        pairs.append(Pair(client: client, upstream: upstream))
                    } else {
                        close(client)
                    }
                }
            }
            var closed: Set<Int> = []
            for index in 0..<polled {
                let clientEvents = descriptors[1 + 2 * index].revents
                let upstreamEvents = descriptors[2 + 2 * index].revents
                if upstreamEvents != 0 {
                    if !move(from: pairs[index].upstream, to: pairs[index].client, &buffer) { closed.insert(index) }
                }
                if clientEvents != 0, !closed.contains(index) {
                    let count = read(pairs[index].client, &buffer, buffer.count)
                    guard count > 0, writeAll(pairs[index].upstream, buffer[0..<count]) else {
                        closed.insert(index)
                        continue
                    }
                    let seen = pairs[index].tail + buffer[0..<count]
                    if contains(seen, pattern) {
                        frozen()
                        return
                    }
                    pairs[index].tail = Array(seen.suffix(pattern.count))
                }
            }
            for index in closed.sorted(by: >) {
                close(pairs[index].client)
                close(pairs[index].upstream)
                pairs.remove(at: index)
            }
        }
    }

    private func move(from source: Int32, to destination: Int32, _ buffer: inout [UInt8]) -> Bool {
        let count = read(source, &buffer, buffer.count)
        return count > 0 && writeAll(destination, buffer[0..<count])
    }

    private func writeAll(_ fd: Int32, _ bytes: ArraySlice<UInt8>) -> Bool {
        var rest = bytes
        while !rest.isEmpty {
            let written = rest.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard written > 0 else { return false }
            rest = rest.dropFirst(written)
        }
        return true
    }

    private func connectUpstream() -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = Self.loopback(port: upstreamPort)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            return nil
        }
        return fd
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        for start in 0...(haystack.count - needle.count) where haystack[start..<(start + needle.count)].elementsEqual(needle) {
            return true
        }
        return false
    }
}

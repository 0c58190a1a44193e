import Foundation

/// Where a queue's files go, and how a queue name becomes one safe folder name.
enum QueueFolder {
    /// The platform's per-user data folder + `QueueKit/Queues`.
    ///
    /// Linux and other Unix: `$XDG_DATA_HOME` (when set to an absolute path), else
    /// `$HOME/.local/share`. Apple platforms: the user's Application Support folder.
    static func defaultRoot(environment: [String: String] = ProcessInfo.processInfo.environment) throws(PersistenceError) -> URL {
        #if canImport(Darwin)
        guard let support = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first else {
            throw PersistenceError(
                code: .storageUnavailable,
                message: "The Application Support folder could not be found; pass `directory:` to choose a folder."
            )
        }
        return support.appendingPathComponent("QueueKit", isDirectory: true)
            .appendingPathComponent("Queues", isDirectory: true)
        #else
        let base: URL
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") {
            base = URL(fileURLWithPath: xdg, isDirectory: true)
        } else if let home = environment["HOME"], home.hasPrefix("/") {
            base = URL(fileURLWithPath: home, isDirectory: true)
                .appendingPathComponent(".local", isDirectory: true)
                .appendingPathComponent("share", isDirectory: true)
        } else {
            throw PersistenceError(
                code: .storageUnavailable,
                message: "Neither XDG_DATA_HOME nor HOME is set to an absolute path, so the default queue folder "
                    + "is unknown; set one of them or pass `directory:`."
            )
        }
        return base.appendingPathComponent("QueueKit", isDirectory: true)
            .appendingPathComponent("Queues", isDirectory: true)
        #endif
    }

    /// Turns a queue name into one path component that stays inside its parent folder.
    ///
    /// A name that is already safe (letters, digits, `-`, `_` and `.` only, no leading dot,
    /// at most 120 bytes) is its own folder name, as it always was. Any other name is changed:
    /// each space or other character (`/`, `\`, control characters, ...) becomes `-`, leading
    /// dots are dropped (no `.` or `..`), and then, so that two names that differ only in a
    /// changed character never share a folder, a hash of the original name is appended:
    /// "Upload Queue" -> "Upload-Queue-<16 hex digits>", never "Upload-Queue" (the folder of
    /// the queue named "Upload-Queue"). An empty result becomes `Queue`.
    static func sanitize(_ name: String) -> String {
        var result = ""
        var changed = false
        for scalar in name.unicodeScalars {
            let isControl = scalar.properties.generalCategory == .control
                || scalar.properties.generalCategory == .format
            if !isControl,
                scalar == "-" || scalar == "_" || scalar == "." || scalar.properties.isAlphabetic
                    || scalar.properties.numericType != nil
            {
                result.unicodeScalars.append(scalar)
            } else {
                result.append("-")
                changed = true
            }
        }
        while result.hasPrefix(".") {
            result.removeFirst()
            changed = true
        }
        if result.utf8.count > 120 {
            result = String(decoding: result.utf8.prefix(120), as: UTF8.self)
            changed = true
        }
        if result.isEmpty {
            result = "Queue"
            changed = true
        }
        if changed {
            result += "-" + hexHash(name)
        }
        return result
    }

    /// A stable 64-bit FNV-1a hash in hex; not for security, only to keep names apart.
    static func hexHash(_ string: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in string.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}

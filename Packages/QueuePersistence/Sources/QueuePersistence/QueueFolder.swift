import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

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

    /// Turns a queue name into one path component that stays inside its parent folder: the
    /// queue's primary folder name.
    ///
    /// A name that is already safe (letters, digits, `-`, `_` and `.` only, no leading dot,
    /// at most 120 bytes) is its own folder name, as it always was. A space becomes `-`, as the
    /// seed documents ("Observation Upload Queue" -> "Observation-Upload-Queue"). Any other change
    /// (`/`, `\`, control characters, leading dots, a name too long or empty) also becomes `-`
    /// and appends a hash of the original name, so that such names never collide with a safe one.
    /// Two names that still end up alike (`"Upload Queue"` and `"Upload-Queue"`) are kept apart
    /// by ``resolve(_:in:)``.
    static func sanitize(_ name: String) -> String {
        var result = ""
        var changed = false
        for scalar in name.unicodeScalars {
            let isControl = scalar.properties.generalCategory == .control
                || scalar.properties.generalCategory == .format
            if scalar == " " {
                result.append("-")
            } else if !isControl,
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

    /// The file in a queue folder that names the queue owning it.
    static let ownerFile = ".queue-name"

    /// The folder of queue `name` under `root`: its primary folder (``sanitize(_:)``) unless a
    /// queue with another name owns that one, then the primary name plus a hash of `name`.
    ///
    /// Each folder records its owner's exact name in ``ownerFile``; a folder without one was
    /// written by an earlier version and is adopted by the first queue that opens it (an
    /// already-safe name keeps its folder). So `"Upload Queue"` and `"Upload-Queue"` never share
    /// a folder: the first to open gets `Upload-Queue`, the other `Upload-Queue-<hash>`, and each
    /// keeps its own from then on.
    ///
    /// - Throws: ``PersistenceError`` `.storageUnavailable` when an owner file exists but cannot
    ///   be read (EACCES, EIO, EMFILE): whose folder it is stays unknown, and taking it could mean
    ///   loading, running and clearing another queue's jobs.
    static func resolve(_ name: String, in root: URL) throws(PersistenceError) -> URL {
        let primary = root.appendingPathComponent(sanitize(name), isDirectory: true)
        if try claim(primary, for: name) { return primary }
        let secondary = root.appendingPathComponent(sanitize(name) + "-" + hexHash(name), isDirectory: true)
        _ = try claim(secondary, for: name)
        return secondary
    }

    /// Whether `folder` belongs to `name`, claiming it when it is new or unowned. A folder that
    /// cannot be created counts as `name`'s: the store reports the real error. An owner file that
    /// exists but cannot be read is an error: the folder may be another queue's.
    ///
    /// The owner file is written whole under a name of its own and then linked into place:
    /// `link` fails when the owner file exists, so of two queues that claim the folder at once
    /// (two persisters made on two threads, two processes) exactly one gets it, and the other
    /// reads its name. Checked, then written (as before), both could claim it and share it.
    private static func claim(_ folder: URL, for name: String) throws(PersistenceError) -> Bool {
        let owner = folder.appendingPathComponent(ownerFile).path
        if let recorded = try readOwner(owner) {
            return recorded == name
        }
        do {
            // Flushed into its parent: the store's own writes flush the folder's entries (this
            // owner file's too), not the folder's entry in the root.
            try DurableFile.makeDirectory(folder.path)
            // Not named like the store's temporary files: opening the folder (another queue's
            // store, right now) removes those. A crash between the write and the removal below
            // leaves this small file behind; nothing reads it.
            let temporary = folder.appendingPathComponent(ownerFile + ".tmp-" + UUID().uuidString).path
            try DurableFile.writeNewFile(Data(name.utf8), to: temporary)
            defer { try? DurableFile.remove(temporary) }
            if link(temporary, owner) != 0 {
                guard errno == EEXIST else { return true }
                // Another queue linked its name first.
                return try readOwner(owner) == name
            }
        } catch let error as PersistenceError {
            throw error
        } catch {
            return true
        }
        return true
    }

    /// The queue name an owner file records; `nil` when there is no owner file.
    ///
    /// - Throws: ``PersistenceError`` `.storageUnavailable` when it exists but cannot be read.
    private static func readOwner(_ path: String) throws(PersistenceError) -> String? {
        do {
            return String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)), as: UTF8.self)
        } catch let error as CocoaError where error.code == .fileReadNoSuchFile {
            return nil
        } catch {
            throw PersistenceError(
                code: .storageUnavailable,
                message: "Cannot read the owner file of queue folder \((path as NSString).deletingLastPathComponent), so which queue owns it is unknown; check its permissions (or the process's open files), then try again.",
                path: path,
                underlying: error
            )
        }
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

import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Small POSIX helpers for crash-safe files. Every path is absolute: nothing here changes
/// or depends on the process's working directory.
enum DurableFile {
    /// The errno of the last failed call, as a Foundation error carrying the POSIX code.
    static func posixError(_ call: String, _ path: String) -> any Error {
        let code = errno
        return NSError(
            domain: NSPOSIXErrorDomain,
            code: Int(code),
            userInfo: [NSLocalizedDescriptionKey: "\(call)(\(path)): \(String(cString: strerror(code)))"]
        )
    }

    /// Flushes `fd` to stable storage. On Apple platforms `fsync` only reaches the drive's
    /// cache, so `F_FULLFSYNC` is asked for first.
    static func sync(_ fd: Int32) -> Bool {
        #if canImport(Darwin)
        if fcntl(fd, F_FULLFSYNC) == 0 { return true }
        #endif
        while true {
            if fsync(fd) == 0 { return true }
            if errno != EINTR { return false }
        }
    }

    /// Creates `path` (which must not exist), writes `data`, and flushes it to disk.
    static func writeNewFile(_ data: Data, to path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw posixError("open", path) }
        var failure: (any Error)?
        data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) in
            var offset = 0
            while offset < buffer.count, let base = buffer.baseAddress {
                let written = write(fd, base + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    failure = posixError("write", path)
                    return
                }
                offset += written
            }
        }
        if failure == nil, !sync(fd) {
            failure = posixError("fsync", path)
        }
        if close(fd) != 0, failure == nil {
            failure = posixError("close", path)
        }
        if let failure {
            unlink(path)
            throw failure
        }
    }

    /// Renames `source` to `destination` atomically (same folder or file system).
    static func rename(_ source: String, to destination: String) throws {
        #if canImport(Darwin)
        let result = Darwin.rename(source, destination)
        #elseif canImport(Glibc)
        let result = Glibc.rename(source, destination)
        #else
        let result = Musl.rename(source, destination)
        #endif
        guard result == 0 else { throw posixError("rename", source) }
    }

    /// Removes `path`; a missing file is not an error.
    static func remove(_ path: String) throws {
        if unlink(path) != 0, errno != ENOENT {
            throw posixError("unlink", path)
        }
    }

    /// Flushes a folder's entries (a rename, a new or removed file) to disk.
    static func syncDirectory(_ path: String) throws {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw posixError("open", path) }
        defer { close(fd) }
        guard sync(fd) else { throw posixError("fsync", path) }
    }

    /// Reads the whole file at `path`.
    static func read(_ path: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: path), options: [.uncached])
    }

    /// Creates `path` and its missing parents, each flushed into its parent: a folder whose entry
    /// was never flushed can vanish in a power cut with every job file written into it since.
    static func makeDirectory(_ path: String) throws {
        var missing: [String] = []
        // As given, not standardized: `..` after a symbolic link is the kernel's to resolve.
        var current = path
        while current.count > 1, current.hasSuffix("/") { current.removeLast() }
        while !FileManager.default.fileExists(atPath: current) {
            missing.append(current)
            let parent = (current as NSString).deletingLastPathComponent
            guard parent != current, !parent.isEmpty else { break }
            current = parent
        }
        for directory in missing.reversed() {
            // EEXIST: another process made it meanwhile; its entry is flushed here all the same.
            guard mkdir(directory, 0o777) == 0 || errno == EEXIST else { throw posixError("mkdir", directory) }
            // Best effort: a parent that may be written but not read (mode 0300) cannot be opened
            // to flush; the folder exists all the same, as it did before this flush was added.
            try? syncDirectory((directory as NSString).deletingLastPathComponent)
        }
        // Fails as before when `path` is a file.
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// The names in the folder at `path`.
    static func list(_ path: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: path)
    }
}

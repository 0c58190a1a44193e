import Foundation
@testable import QueuePersistence
import Testing
import QueueCoreTesting

@Suite(.timeLimit(.minutes(1)))
struct FileBasedPersisterTests {
    @Test func aSafeNameIsItsOwnFolderAndSpacesBecomeDashesAsTheSeedSays() throws {
        #expect(FileBasedPersister<CuteJob>.folderName(forQueueName: "Observation-Upload-Queue") == "Observation-Upload-Queue")
        #expect(FileBasedPersister<CuteJob>.folderName(forQueueName: "uploads_v2.1") == "uploads_v2.1")
        #expect(FileBasedPersister<CuteJob>.folderName(forQueueName: "Observation Upload Queue") == "Observation-Upload-Queue")
        let directory = try TemporaryDirectory()
        let persister = FileBasedPersister(handling: CuteJob.self, queueName: "Observation Upload Queue", directory: directory.url)
        #expect(persister.directory?.lastPathComponent == "Observation-Upload-Queue")
    }

    @Test func defaultLocationFollowsXDGDataHomeThenHome() throws {
        #if !canImport(Darwin)
        let xdg = try QueueFolder.defaultRoot(environment: ["XDG_DATA_HOME": "/data/x", "HOME": "/home/u"])
        #expect(xdg.path == "/data/x/QueueKit/Queues")
        let home = try QueueFolder.defaultRoot(environment: ["HOME": "/home/u"])
        #expect(home.path == "/home/u/.local/share/QueueKit/Queues")
        let relative = try QueueFolder.defaultRoot(environment: ["XDG_DATA_HOME": "relative", "HOME": "/home/u"])
        #expect(relative.path == "/home/u/.local/share/QueueKit/Queues")
        let error = #expect(throws: PersistenceError.self) {
            try QueueFolder.defaultRoot(environment: [:])
        }
        #expect(error?.code == .storageUnavailable)
        #endif
    }

    @Test func seedInitializerStoresJobsUnderTheDefaultQueuesFolder() throws {
        let name = "QueuePersistenceTests \(UUID().uuidString)"
        let persister = FileBasedPersister(handling: CuteJob.self, queueName: name)
        let directory = try #require(persister.directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(directory.standardizedFileURL.path == (try FileBasedPersister<CuteJob>.defaultRootDirectory())
            .appendingPathComponent(FileBasedPersister<CuteJob>.folderName(forQueueName: name)).standardizedFileURL.path)
        let job = CuteJob(data: Data("x".utf8), action: "create")
        try persister.persist([job])
        #expect(filesBelow(directory).count == 1)
        #expect(try FileBasedPersister(handling: CuteJob.self, queueName: name).load() == [job])
    }

    @Test(arguments: ["../../escape", "/etc/passwd", "..", ".", "a/../../b", "\u{0}nul\u{1}ctl\n", "", "..\\..\\win"])
    func hostileQueueNamesStayInsideTheRootFolder(_ name: String) throws {
        let directory = try TemporaryDirectory()
        let root = directory.url.appendingPathComponent("root", isDirectory: true)
        let persister = FileBasedPersister(handling: CuteJob.self, queueName: name, directory: root)
        try persister.persist([CuteJob(action: "a")])
        let folder = try #require(persister.directory).standardizedFileURL
        #expect(folder.deletingLastPathComponent().path == root.standardizedFileURL.path)
        #expect(!folder.lastPathComponent.hasPrefix("."))
        // Everything written is inside root/<one folder>/.
        #expect(filesBelow(directory.url).allSatisfy { $0.hasPrefix("root/\(folder.lastPathComponent)/") })
        #expect(filesBelow(directory.url).count == 1)
    }

    @Test(arguments: [false, true])
    func namesThatSanitizeAlikeDoNotShareAFolder(reversed: Bool) throws {
        let directory = try TemporaryDirectory()
        let names = ["a/b", "a\\b", "a:b", "a b", "a-b", "a..b", "a\tb", "a  b", "a--b"]
        let persisters = (reversed ? names.reversed() : names).map {
            FileBasedPersister(handling: CuteJob.self, queueName: $0, directory: directory.url)
        }
        #expect(Set(persisters.compactMap(\.directory)).count == names.count)
        // And each keeps its folder when opened again.
        let again = (reversed ? names.reversed() : names).map {
            FileBasedPersister(handling: CuteJob.self, queueName: $0, directory: directory.url).directory
        }
        #expect(again == persisters.map(\.directory))
    }

    @Test(arguments: [false, true])
    func queuesWhoseNamesDifferOnlyInASpaceOrADashNeverSeeOrClearEachOthersJobs(dashedFirst: Bool) throws {
        let directory = try TemporaryDirectory()
        let first = FileBasedPersister(handling: CuteJob.self, queueName: dashedFirst ? "Upload-Queue" : "Upload Queue", directory: directory.url)
        let second = FileBasedPersister(handling: CuteJob.self, queueName: dashedFirst ? "Upload Queue" : "Upload-Queue", directory: directory.url)
        let spaced = dashedFirst ? second : first
        let dashed = dashedFirst ? first : second
        #expect(first.directory?.lastPathComponent == "Upload-Queue", "the first to open owns the folder")
        #expect(spaced.directory != dashed.directory)
        let mine = CuteJob(id: "spaced-job")
        let theirs = CuteJob(id: "dashed-job")
        try spaced.persist([mine])
        try dashed.persist([theirs])
        #expect(try spaced.load() == [mine])
        #expect(try dashed.load() == [theirs])
        spaced.clear(completion: nil)
        #expect(try spaced.load() == [])
        #expect(try dashed.load() == [theirs])
    }

    @Test func aSafeNamesFolderWrittenByTheEarlierLayoutKeepsItsJobsAndTheirOrder() throws {
        // Lay the folder out as the previous version wrote it: `<root>/<name>/<20-digit
        // sequence>-<id>.job`, each file the job's JSON.
        let directory = try TemporaryDirectory()
        let folder = directory.file("Photo-Uploads_v1")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let old = [CuteJob(id: "old-1", action: "a"), CuteJob(id: "old-2", action: "b")]
        for (index, job) in old.enumerated() {
            try JSONEncoder().encode(job).write(to: folder.appendingPathComponent("0000000000000000000\(index + 1)-\(job.id).job"))
        }
        let persister = FileBasedPersister(handling: CuteJob.self, queueName: "Photo-Uploads_v1", directory: directory.url)
        #expect(persister.directory?.standardizedFileURL.path == folder.standardizedFileURL.path)
        #expect(try persister.load() == old)
        let new = CuteJob(id: "new-3")
        try persister.persist([new])
        #expect(try FileBasedPersister(handling: CuteJob.self, queueName: "Photo-Uploads_v1", directory: directory.url).load() == old + [new])
        #expect(filesBelow(directory.url).allSatisfy { $0.hasPrefix("Photo-Uploads_v1/") })
    }

    @Test func eachJobIsOneFileAndNoTemporaryFileRemains() throws {
        let directory = try TemporaryDirectory()
        let persister = FileBasedPersister(handling: CuteJob.self, queueName: "Uploads", directory: directory.url)
        let jobs = (0..<5).map { CuteJob(id: "job-\($0)") }
        try persister.persist(jobs)
        try persister.delete(jobs[2])
        let files = filesBelow(directory.url)
        #expect(files.count == 4)
        #expect(files.allSatisfy { $0.hasPrefix("Uploads/") && $0.hasSuffix(".job") })
    }

    @Test func persistingNeverChangesTheWorkingDirectory() throws {
        let before = FileManager.default.currentDirectoryPath
        let directory = try TemporaryDirectory()
        let persister = FileBasedPersister(handling: CuteJob.self, queueName: "cwd", directory: directory.url)
        try persister.persist([CuteJob()])
        _ = try persister.load()
        #expect(FileManager.default.currentDirectoryPath == before)
    }

    @Test(arguments: ["empty", "truncated", "garbage", "wrongType"])
    func aCorruptFileIsMovedAsideAndEveryOtherJobLoads(_ damage: String) throws {
        let directory = try TemporaryDirectory()
        let persister = FileBasedPersister(handling: CuteJob.self, queueName: "q", directory: directory.url)
        let jobs = (0..<3).map { CuteJob(id: "job-\($0)", data: Data(repeating: UInt8($0), count: 64), action: "x") }
        try persister.persist(jobs)
        let folder = try #require(persister.directory)
        let victim = filesBelow(folder).sorted()[1]
        let url = folder.appendingPathComponent(victim)
        let original = try Data(contentsOf: url)
        switch damage {
        case "empty": try Data().write(to: url)
        case "truncated": try original.prefix(original.count / 2).write(to: url)
        case "garbage": try Data([0xff, 0x00, 0x13, 0x37]).write(to: url)
        default: try Data(#"{"something":"else"}"#.utf8).write(to: url)
        }

        let reopened = FileBasedPersister(handling: CuteJob.self, queueName: "q", directory: directory.url)
        #expect(try reopened.load() == [jobs[0], jobs[2]])
        let issue = try #require(reopened.loadIssues.first)
        #expect(reopened.loadIssues.count == 1)
        #expect(issue.code == .corruptJob)
        #expect(issue.path == folder.appendingPathComponent("corrupt/\(victim)").path)
        #expect(filesBelow(folder).contains("corrupt/\(victim)"))
        // The next load is clean, and new jobs still go last.
        let late = CuteJob(id: "late")
        try reopened.persist([late])
        #expect(try reopened.load() == [jobs[0], jobs[2], late])
        #expect(reopened.loadIssues.isEmpty)
    }

    @Test func aTemporaryFileLeftByACrashIsRemovedAndNeverLoaded() throws {
        let directory = try TemporaryDirectory()
        let job = CuteJob(id: "kept")
        try FileBasedPersister(handling: CuteJob.self, queueName: "q", directory: directory.url).persist([job])
        let folder = directory.url.appendingPathComponent("q")
        try Data("{\"half".utf8).write(to: folder.appendingPathComponent(".tmp-00000000000000000002-lost.job"))
        // Drop every persister of the folder, then open it again as a restarted process would.
        let reopened = FileBasedPersister(handling: CuteJob.self, queueName: "q", directory: directory.url)
        #expect(try reopened.load() == [job])
        #expect(reopened.loadIssues.isEmpty)
        #expect(filesBelow(folder).count == 1)
    }

    @Test func anUnusableFolderIsATypedErrorOnFirstUseNotACrash() throws {
        let directory = try TemporaryDirectory()
        let blocker = directory.file("a-file")
        try Data("not a folder".utf8).write(to: blocker)
        let persister = FileBasedPersister(handling: CuteJob.self, queueName: "q", directory: blocker)
        let error = #expect(throws: PersistenceError.self) {
            try persister.persist([CuteJob()])
        }
        #expect(error?.code == .storageUnavailable)
        #expect(throws: PersistenceError.self) { try persister.load() }
    }

    @Test func twoQueuesInOneFolderDoNotSeeEachOther() throws {
        let directory = try TemporaryDirectory()
        let uploads = FileBasedPersister(handling: CuteJob.self, queueName: "uploads", directory: directory.url)
        let deletes = FileBasedPersister(handling: CuteJob.self, queueName: "deletes", directory: directory.url)
        let a = CuteJob(id: "same-id", action: "upload")
        let b = CuteJob(id: "same-id", action: "delete")
        try uploads.persist([a])
        try deletes.persist([b])
        try deletes.delete(b)
        #expect(try uploads.load() == [a])
        #expect(try deletes.load() == [])
    }

    @Test func fileNamesRoundTripEveryID() {
        for id in ["", "abc-DEF-123", "a/b", "..", "_x_", "é😀", "\n"] {
            let name = FileJobStore.fileName(sequence: 42, id: id)
            let parsed = FileJobStore.parse(fileName: name)
            #expect(parsed?.sequence == 42)
            #expect(parsed?.id == id)
            #expect(!name.contains("/") && !name.hasPrefix("."))
        }
        let long = String(repeating: "x", count: 500)
        #expect(FileJobStore.parse(fileName: FileJobStore.fileName(sequence: 7, id: long))?.id == nil)
    }
}

import Dispatch
import Foundation
@testable import QueuePersistence
import Synchronization
import Testing
import QueueCore
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

    /// Two such queues opened at the same moment, on two threads: each still gets a folder of
    /// its own. The folder's owner was checked and then written, so both could claim it.
    @Test func queuesWhoseNamesDifferOnlyInASpaceOrADashOpenedAtOnceNeverShareAFolder() throws {
        for _ in 0..<200 {
            let directory = try TemporaryDirectory()
            let folders = Mutex<[String: String]>([:])
            DispatchQueue.concurrentPerform(iterations: 2) { index in
                let name = index == 0 ? "Upload Queue" : "Upload-Queue"
                let persister = FileBasedPersister(handling: CuteJob.self, queueName: name, directory: directory.url)
                folders.withLock { $0[name] = persister.directory?.path }
            }
            let paths = folders.withLock { $0 }
            try #require(paths["Upload Queue"] != paths["Upload-Queue"], "both claimed \(paths["Upload Queue"] ?? "")")
        }
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

    @Test func aJobFileWithTheHighestNumberThereIsFailsPersistWithATypedErrorNotATrap() throws {
        // A file this version would never write: its number leaves none to store a job after it
        // (opening the folder computed `number + 1` and trapped).
        let directory = try TemporaryDirectory()
        let folder = directory.file("Uploads")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let last = CuteJob(id: "last", action: "a")
        try JSONEncoder().encode(last).write(to: folder.appendingPathComponent("\(UInt64.max)-last.job"))
        let persister = FileBasedPersister(handling: CuteJob.self, queueName: "Uploads", directory: directory.url)
        #expect(try persister.load() == [last])
        let error = #expect(throws: PersistenceError.self) { try persister.persist([CuteJob(id: "new")]) }
        #expect(error?.code == .writeFailed)
        #expect(error?.message.contains("highest number") == true, "\(String(describing: error))")
        // Storing first still has room, and the stored jobs are as they were.
        let first = CuteJob(id: "first")
        try persister.persistFirst([first])
        #expect(try persister.load() == [first, last])
        // Replacing a stored job needs no new number.
        let replaced = CuteJob(id: "last", action: "b")
        try persister.persist([replaced])
        #expect(try persister.load() == [first, replaced])
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

    /// A job type may name its id otherwise in its JSON: its files are jobs, not damaged bytes.
    @Test func aJobTypeThatStoresItsIDUnderAnotherKeyLoadsAndDeletes() throws {
        let directory = try TemporaryDirectory()
        // The long id's file name carries a hash of it: the folder's index reads the id from the file.
        let jobs = [RenamedIDJob(id: "a"), RenamedIDJob(id: "b"), RenamedIDJob(id: String(repeating: "long-", count: 60))]
        try FileBasedPersister(handling: RenamedIDJob.self, queueName: "q", directory: directory.url).persist(jobs)
        let folder = directory.url.appendingPathComponent("q")
        try #require(String(decoding: try Data(contentsOf: folder.appendingPathComponent(filesBelow(folder).sorted()[0])), as: UTF8.self)
            .contains(#""uuid":"a""#), "stored without an \"id\" key")

        let reopened = FileBasedPersister(handling: RenamedIDJob.self, queueName: "q", directory: directory.url)
        #expect(try reopened.load() == jobs)
        #expect(reopened.loadIssues.isEmpty)
        #expect(!filesBelow(folder).contains { $0.hasPrefix("corrupt/") })
        try reopened.delete(jobs[2])
        try reopened.delete(jobs[0])
        #expect(try FileBasedPersister(handling: RenamedIDJob.self, queueName: "q", directory: directory.url).load() == [jobs[1]])
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
    // MARK: - persistFirst

    /// The job files of `folder`, by name, in name order (which is load order).
    private func jobFiles(_ folder: URL) -> [String] {
        filesBelow(folder).filter { $0.hasSuffix(".job") && !$0.contains("/") }
    }

    @Test func aNewFolderNumbersJobsFromTheMiddleAndJobsStoredFirstBelowIt() throws {
        let directory = try TemporaryDirectory()
        let persister = FileBasedPersister(handling: CuteJob.self, queueName: "q", directory: directory.url)
        try persister.persist([CuteJob(id: "a"), CuteJob(id: "b")])
        try persister.persistFirst([CuteJob(id: "r"), CuteJob(id: "s")])
        try persister.persistFirst([CuteJob(id: "t")])
        let folder = try #require(persister.directory)
        #expect(jobFiles(folder) == [
            "09999999999999999997-t.job",
            "09999999999999999998-r.job",
            "09999999999999999999-s.job",
            "10000000000000000000-a.job",
            "10000000000000000001-b.job",
        ])
        #expect(try persister.load().map(\.id) == ["t", "r", "s", "a", "b"])
    }

    @Test func movingAStoredJobToTheFrontLeavesOneFileOfIt() throws {
        let directory = try TemporaryDirectory()
        let persister = FileBasedPersister(handling: CuteJob.self, queueName: "q", directory: directory.url)
        try persister.persist([CuteJob(id: "a"), CuteJob(id: "b", action: "old")])
        try persister.persistFirst([CuteJob(id: "b", action: "new")])
        let folder = try #require(persister.directory)
        #expect(jobFiles(folder) == ["09999999999999999999-b.job", "10000000000000000000-a.job"])
        #expect(filesBelow(folder).allSatisfy { !$0.contains(".tmp-") })
        let reopened = FileBasedPersister(handling: CuteJob.self, queueName: "q", directory: directory.url)
        #expect(try reopened.load().map(\.action) == ["new", ""])
    }

    /// A folder numbered from 1 (as written before `persistFirst` existed) has room below its
    /// lowest number for that many jobs; then every file is renumbered once, in order.
    @Test func aFolderNumberedFromOneIsRenumberedOnceWhenItHasNoRoomLeftAndKeepsItsOrder() throws {
        let directory = try TemporaryDirectory()
        let folder = directory.file("old")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let old = [CuteJob(id: "old-2", action: "a"), CuteJob(id: "old-3", action: "b")]
        for (index, job) in old.enumerated() {
            try JSONEncoder().encode(job).write(to: folder.appendingPathComponent("0000000000000000000\(index + 2)-\(job.id).job"))
        }
        let persister = FileBasedPersister(handling: CuteJob.self, queueName: "old", directory: directory.url)
        // Room for one (number 1) and one more (number 0): no file is renamed.
        try persister.persistFirst([CuteJob(id: "r1")])
        try persister.persistFirst([CuteJob(id: "r0")])
        #expect(jobFiles(folder) == [
            "00000000000000000000-r0.job", "00000000000000000001-r1.job",
            "00000000000000000002-old-2.job", "00000000000000000003-old-3.job",
        ])
        // No room below 0: every file moves up by 10^19, and the new jobs go below them.
        try persister.persistFirst([CuteJob(id: "s"), CuteJob(id: "t")])
        try persister.persist([CuteJob(id: "last")])
        let expected = ["s", "t", "r0", "r1", "old-2", "old-3", "last"]
        #expect(jobFiles(folder) == [
            "09999999999999999998-s.job", "09999999999999999999-t.job",
            "10000000000000000000-r0.job", "10000000000000000001-r1.job",
            "10000000000000000002-old-2.job", "10000000000000000003-old-3.job",
            "10000000000000000004-last.job",
        ])
        #expect(try persister.load().map(\.id) == expected)
        // Deletes find the renamed files; a reopened folder agrees.
        try persister.delete(CuteJob(id: "old-2"))
        let reopened = FileBasedPersister(handling: CuteJob.self, queueName: "old", directory: directory.url)
        #expect(try reopened.load().map(\.id) == expected.filter { $0 != "old-2" })
        #expect(try reopened.load().first { $0.id == "old-3" }?.action == "b")
    }

    /// A crash during the renumbering leaves the highest files moved and the rest not: the
    /// order is the same, and the next `persistFirst` that needs room moves the rest.
    @Test func aRenumberingCutShortByACrashKeepsTheOrderAndIsCarriedOn() throws {
        let directory = try TemporaryDirectory()
        let folder = directory.file("cut")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let names = [
            "00000000000000000000-a.job", "00000000000000000001-b.job",
            "10000000000000000002-c.job", "10000000000000000003-d.job",
        ]
        for name in names {
            let id = String(name.dropFirst(21).dropLast(4))
            try JSONEncoder().encode(CuteJob(id: id)).write(to: folder.appendingPathComponent(name))
        }
        let persister = FileBasedPersister(handling: CuteJob.self, queueName: "cut", directory: directory.url)
        #expect(try persister.load().map(\.id) == ["a", "b", "c", "d"])
        try persister.persist([CuteJob(id: "e")])
        try persister.persistFirst([CuteJob(id: "r")])
        #expect(try persister.load().map(\.id) == ["r", "a", "b", "c", "d", "e"])
        #expect(jobFiles(folder).first == "09999999999999999999-r.job")
        #expect(jobFiles(folder).allSatisfy { $0.hasPrefix("09") || $0.hasPrefix("10") })
        let reopened = FileBasedPersister(handling: CuteJob.self, queueName: "cut", directory: directory.url)
        #expect(try reopened.load().map(\.id) == ["r", "a", "b", "c", "d", "e"])
    }

    /// The process died after moving a stored job to the front and before removing its old
    /// file: the new file loads, opening the folder removes the old one, and the job, once
    /// deleted, does not come back.
    @Test func anOldFileLeftByACrashWhileMovingAJobToTheFrontIsRemovedWhenTheFolderIsOpened() throws {
        let directory = try TemporaryDirectory()
        let folder = directory.file("moved")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let files = [
            ("09999999999999999999-x.job", CuteJob(id: "x", action: "new")),
            ("10000000000000000000-x.job", CuteJob(id: "x", action: "old")),
            ("10000000000000000001-y.job", CuteJob(id: "y")),
        ]
        for (name, job) in files {
            try JSONEncoder().encode(job).write(to: folder.appendingPathComponent(name))
        }
        let persister = FileBasedPersister(handling: CuteJob.self, queueName: "moved", directory: directory.url)
        #expect(try persister.load().map(\.action) == ["new", ""])
        #expect(jobFiles(folder) == ["09999999999999999999-x.job", "10000000000000000001-y.job"])
        try persister.delete(CuteJob(id: "x"))
        let reopened = FileBasedPersister(handling: CuteJob.self, queueName: "moved", directory: directory.url)
        #expect(try reopened.load().map(\.id) == ["y"])
    }

    /// If the job's front file is damaged, the older copy behind it is kept, not removed: the
    /// damaged file is moved aside, the copy loads in its place, and a delete removes it.
    @Test func anOldCopyBehindADamagedFileIsKeptAndLoadsInItsPlace() throws {
        let directory = try TemporaryDirectory()
        let folder = directory.file("damaged")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data("{\"id\":\"x\",\"cut".utf8).write(to: folder.appendingPathComponent("09999999999999999999-x.job"))
        try JSONEncoder().encode(CuteJob(id: "x", action: "old")).write(to: folder.appendingPathComponent("10000000000000000000-x.job"))
        try JSONEncoder().encode(CuteJob(id: "y")).write(to: folder.appendingPathComponent("10000000000000000001-y.job"))

        let persister = FileBasedPersister(handling: CuteJob.self, queueName: "damaged", directory: directory.url)
        #expect(try persister.load().map(\.action) == ["old", ""])
        #expect(persister.loadIssues.map(\.code) == [.corruptJob])
        #expect(jobFiles(folder) == ["10000000000000000000-x.job", "10000000000000000001-y.job"])
        try persister.delete(CuteJob(id: "x"))
        let reopened = FileBasedPersister(handling: CuteJob.self, queueName: "damaged", directory: directory.url)
        #expect(try reopened.load().map(\.id) == ["y"])
    }

    /// Moving a stored job to the front renames its file: a load that listed the folder
    /// before the move must not miss the job (it did, in 53 of 300 loads, before loads read
    /// again after a move).
    @Test func aLoadWhileJobsAreMovedToTheFrontSeesEveryJobOnce() throws {
        let directory = try TemporaryDirectory()
        let persister = FileBasedPersister(handling: CuteJob.self, queueName: "q", directory: directory.url)
        let jobs = (0..<20).map { CuteJob(id: "j\($0)") }
        try persister.persist(jobs)
        let bad = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 2) { worker in
            for round in 0..<300 {
                do {
                    if worker == 0 {
                        try persister.persistFirst([jobs[round % 20]])
                    } else {
                        let ids = try persister.load().map(\.id)
                        if ids.count != 20 || Set(ids).count != 20 { bad.withLock { $0.append("\(ids.count) jobs") } }
                    }
                } catch {
                    bad.withLock { $0.append("\(error)") }
                }
            }
        }
        #expect(bad.withLock { $0 }.isEmpty)
        // Each job was moved to the front last in the order 0 … 19: 19 is first.
        #expect(try persister.load().map(\.id) == (0..<20).reversed().map { "j\($0)" })
    }

    /// A write that fails (here: a directory is in the way of the second job's temporary file,
    /// so `unlink` fails with EISDIR) stores none of the batch and leaves every stored job in
    /// its place; the persister works again once the obstacle is gone.
    @Test func aPersistFirstWhoseWriteFailsStoresNothingAndMovesNothing() throws {
        let directory = try TemporaryDirectory()
        let persister = FileBasedPersister(handling: CuteJob.self, queueName: "q", directory: directory.url)
        try persister.persist([CuteJob(id: "a"), CuteJob(id: "b", action: "old")])
        let folder = try #require(persister.directory)
        let obstacle = folder.appendingPathComponent(".tmp-09999999999999999999-b.job")
        try FileManager.default.createDirectory(at: obstacle, withIntermediateDirectories: false)

        let error = #expect(throws: PersistenceError.self) {
            try persister.persistFirst([CuteJob(id: "new"), CuteJob(id: "b", action: "moved")])
        }
        #expect(error?.code == .writeFailed)
        #expect(error?.jobID == "b")
        #expect(try persister.load().map(\.id) == ["a", "b"])
        #expect(try persister.load().last?.action == "old")
        #expect(jobFiles(folder) == ["10000000000000000000-a.job", "10000000000000000001-b.job"])
        #expect(filesBelow(folder).allSatisfy { !$0.contains(".tmp-") }, "the first job's temporary file is removed")

        try FileManager.default.removeItem(at: obstacle)
        try persister.persistFirst([CuteJob(id: "new"), CuteJob(id: "b", action: "moved")])
        let reopened = FileBasedPersister(handling: CuteJob.self, queueName: "q", directory: directory.url)
        #expect(try reopened.load().map(\.id) == ["new", "b", "a"])
        #expect(try reopened.load()[1].action == "moved")
    }
}

/// A job whose JSON names its id `uuid`.
private struct RenamedIDJob: QueueJob, Equatable {
    var id: String
    var createdDate = Date(timeIntervalSince1970: 1_000)
    var data: Data?
    var action = "renamed"

    enum CodingKeys: String, CodingKey {
        case id = "uuid", createdDate, data, action
    }
}

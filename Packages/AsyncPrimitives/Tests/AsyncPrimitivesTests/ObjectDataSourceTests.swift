import AsyncPrimitives
import Foundation
import ObjectDataSource
import Synchronization
import Testing

@Suite(.timeLimit(.minutes(1)))
struct ObjectDataSourceTests {
    private enum FixtureError: Error, Equatable {
        case unavailable
    }

    @Test func indexPathHasRowAndSection() {
        let indexPath = IndexPath(row: 3, section: 1)
        #expect(indexPath.row == 3)
        #expect(indexPath.section == 1)
        #expect(Array(indexPath) == [1, 3])
    }

    @Test func arraySourceHasOneTitledSectionWithEveryObject() throws {
        let source = ArrayObjectDataSource(objects: ["a", "b", "c"], sectionName: "Letters")
        #expect(source.numberOfSections() == 1)
        #expect(source.numberOfObjectsInSection(0) == 3)
        #expect(source.numberOfObjectsInSection(1) == 0)
        #expect(source.titleOfSection(0) == "Letters")
        #expect(source.titleOfSection(1) == nil)
        #expect(try (0..<3).map { try source.objectAt(IndexPath(row: $0, section: 0)) } == ["a", "b", "c"])
    }

    @Test(arguments: [
        IndexPath(row: 3, section: 0),
        IndexPath(row: -1, section: 0),
        IndexPath(row: 0, section: 1),
        IndexPath(row: 0, section: -1),
        IndexPath(index: 0),
        IndexPath(),
        IndexPath(indexes: [0, 0, 0]),
    ])
    func outOfRangeIndexPathsThrowATypedError(indexPath: IndexPath) {
        let source = ArrayObjectDataSource(objects: ["a", "b", "c"])
        let error = #expect(throws: AsyncPrimitivesError.self) { try source.objectAt(indexPath) }
        #expect(error?.code == .indexOutOfRange)
    }

    @Test func anEmptyArraySourceThrowsForRowZero() {
        let source = ArrayObjectDataSource<Int>(objects: [])
        #expect(source.numberOfObjectsInSection(0) == 0)
        let error = #expect(throws: AsyncPrimitivesError.self) { try source.objectAt(IndexPath(row: 0, section: 0)) }
        #expect(error?.code == .indexOutOfRange)
    }

    @Test func errorSourceHasOneRowThatThrowsItsError() {
        let source = ErrorObjectDataSource<String>(error: FixtureError.unavailable)
        #expect(source.numberOfSections() == 1)
        #expect(source.numberOfObjectsInSection(0) == 1)
        #expect(source.titleOfSection(0) == nil)
        #expect(throws: FixtureError.unavailable) { try source.objectAt(IndexPath(row: 0, section: 0)) }
        let error = #expect(throws: AsyncPrimitivesError.self) { try source.objectAt(IndexPath(row: 1, section: 0)) }
        #expect(error?.code == .indexOutOfRange)
    }

    @Test func concatenatingSourcePresentsTheSectionsOfEachSourceInOrder() throws {
        let first = ArrayObjectDataSource(objects: [1, 2], sectionName: "first")
        let failing = ErrorObjectDataSource<Int>(error: FixtureError.unavailable)
        let second = ArrayObjectDataSource(objects: [3, 4, 5], sectionName: "second")
        let source = ConcatenatingObjectDataSource(dataSources: [first, failing, second])
        #expect(source.numberOfSections() == 3)
        #expect((0..<4).map(source.numberOfObjectsInSection) == [2, 1, 3, 0])
        #expect((0..<4).map(source.titleOfSection) == ["first", nil, "second", nil])
        #expect(try source.objectAt(IndexPath(row: 1, section: 0)) == 2)
        #expect(throws: FixtureError.unavailable) { try source.objectAt(IndexPath(row: 0, section: 1)) }
        #expect(try source.objectAt(IndexPath(row: 2, section: 2)) == 5)
        let error = #expect(throws: AsyncPrimitivesError.self) { try source.objectAt(IndexPath(row: 0, section: 3)) }
        #expect(error?.code == .indexOutOfRange)
    }

    @Test func concatenatingNoSourcesIsEmpty() {
        let source = ConcatenatingObjectDataSource<String>(dataSources: [])
        #expect(source.numberOfSections() == 0)
        #expect(source.numberOfObjectsInSection(0) == 0)
        #expect(throws: AsyncPrimitivesError.self) { try source.objectAt(IndexPath(row: 0, section: 0)) }
    }

    @Test func transformingSourceTransformsOnlyTheObjectsRead() throws {
        let transformed = Mutex<[Int]>([])
        let base = ArrayObjectDataSource(objects: [10, 20, 30], sectionName: "numbers")
        let source = TransformingObjectDataSource(objectDataSource: base) { (value: Int) -> String in
            transformed.withLock { $0.append(value) }
            return "#\(value)"
        }
        #expect(transformed.withLock { $0 }.isEmpty)
        #expect(source.numberOfSections() == 1)
        #expect(source.numberOfObjectsInSection(0) == 3)
        #expect(source.titleOfSection(0) == "numbers")
        #expect(try source.objectAt(IndexPath(row: 2, section: 0)) == "#30")
        #expect(transformed.withLock { $0 } == [30])
        #expect(try source.objectAt(IndexPath(row: 2, section: 0)) == "#30")
        #expect(transformed.withLock { $0 } == [30, 30])
        #expect(throws: AsyncPrimitivesError.self) { try source.objectAt(IndexPath(row: 3, section: 0)) }
        #expect(transformed.withLock { $0 } == [30, 30])
    }

    @Test func transformingSourcePassesATransformErrorOn() {
        let source = TransformingObjectDataSource(objectDataSource: ArrayObjectDataSource(objects: [1])) { (_: Int) throws -> Int in
            throw FixtureError.unavailable
        }
        #expect(throws: FixtureError.unavailable) { try source.objectAt(IndexPath(row: 0, section: 0)) }
    }

    @Test func sourcesCanBeUsedThroughTheProtocol() throws {
        let sources: [any ObjectDataSource<String>] = [
            ArrayObjectDataSource(objects: ["x"]),
            TransformingObjectDataSource(objectDataSource: ArrayObjectDataSource(objects: [7])) { "\($0)" },
        ]
        #expect(try sources.map { try $0.objectAt(IndexPath(row: 0, section: 0)) } == ["x", "7"])
    }
}

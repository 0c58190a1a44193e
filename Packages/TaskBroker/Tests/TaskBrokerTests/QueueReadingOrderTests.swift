@testable import TaskBrokerCore
import Testing

/// The order in which a broker reads the queue names it lists: turned on a shared backend, so that
/// workers started together begin on different queues; name order on a store of its own.
struct QueueReadingOrderTests {
    let page = ["q0", "q1", "q2", "q3", "q4"]

    @Test func aSharedBackendsPageIsTurnedToStartAtTheOffsetAndKeepsEveryName() {
        #expect(QueueReadingOrder.of(page, shared: true, offset: 2) == ["q2", "q3", "q4", "q0", "q1"])
        #expect(QueueReadingOrder.of(page, shared: true, offset: 0) == page)
        #expect(QueueReadingOrder.of(page, shared: true, offset: 7) == ["q2", "q3", "q4", "q0", "q1"])
        #expect(QueueReadingOrder.of(page, shared: true, offset: -1) == ["q4", "q0", "q1", "q2", "q3"])
    }

    @Test func aBrokerAloneOnItsStoreReadsInNameOrder() {
        #expect(QueueReadingOrder.of(page, shared: false, offset: 2) == page)
        #expect(QueueReadingOrder.of([], shared: true, offset: 0).isEmpty)
        #expect(QueueReadingOrder.of(["only"], shared: true, offset: 3) == ["only"])
    }
}

import AsyncPrimitives

/// Stands in for the seed's view controller, so that its method references compile as written.
struct BookSearchController: Sendable {
    let webclient: FakeWebClient
    let datastore: FakeDataStore
    let onUpdate: ResultHandler<[BookViewMaster]>

    func searchForInStockBooks(query: String) {
        self.webclient.findBooks(query)                 // -> FutureResult<[BookModel]>
        .timeoutAfter(interval: 10.0)                   // -> FutureResult<[BookModel]>
        .pipe(into: self.datastore.saveBooks(_:))       // -> FutureResult<[BookModel]>
        .filter(self.isBookInStock(_:))                 // -> FutureResult<[BookModel]>
        .map(self.convertBookModelToBookViewMaster(_:)) // -> FutureResult<[BookViewMaster]>
        .then(handleResult: self.updateTableView(_:))
    }

    private func updateTableView(_ result: Result<[BookViewMaster], any Error>) {
        onUpdate(result)
    }

    private func isBookInStock(_ book: BookModel) -> Bool {
        book.stock > 0
    }

    private func convertBookModelToBookViewMaster(_ book: BookModel) -> BookViewMaster {
        BookViewMaster(caption: "\(book.title) (\(book.stock))")
    }
}

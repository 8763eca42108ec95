import Synchronization

/// Items received and not yet handled, taken in batches (a change feed read on one task,
/// applied on another, so that what arrives during one batch makes up the next).
public final class Backlog<Element: Sendable>: Sendable {
    private let items = Mutex<[Element]>([])

    public init() {}

    /// Adds an item; returns how many are pending now.
    @discardableResult
    public func append(_ item: Element) -> Int {
        self.items.withLock {
            $0.append(item)
            return $0.count
        }
    }

    public func take(_ limit: Int) -> [Element] {
        self.items.withLock { items in
            let batch = Array(items.prefix(limit))
            items.removeFirst(batch.count)
            return batch
        }
    }
}

import Synchronization

/// A value made once, when first asked for, then kept: for what costs at start-up and is
/// rarely needed (`rpc.describe`'s schemas, read off the methods' Codable types).
public final class Lazy<Value: Sendable>: Sendable {
    private let make: @Sendable () -> Value
    private let made = Mutex<Value?>(nil)

    public init(_ make: @escaping @Sendable () -> Value) {
        self.make = make
    }

    /// Made under the lock: callers asking at once wait for the one making it.
    public var value: Value {
        self.made.withLock { made in
            if let made { return made }
            let value = self.make()
            made = value
            return value
        }
    }
}

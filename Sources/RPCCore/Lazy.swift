import Synchronization

/// A value made once, when first asked for, then kept: for what costs at start-up and may
/// never be needed (`rpc.describe`'s schemas, read off the methods' Codable types; a
/// method's metrics, made at its first call).
public final class Lazy<Value: Sendable>: Sendable {
    // Inlinable, so that a caller in another module reads it specialized to its value's
    // type: unspecialized, each read looked the generic types up at run time (every
    // request reads its method's instruments).
    @usableFromInline let make: @Sendable () -> Value
    @usableFromInline let made = Mutex<Value?>(nil)

    public init(_ make: @escaping @Sendable () -> Value) {
        self.make = make
    }

    /// Made under the lock: callers asking at once wait for the one making it.
    @inlinable
    public var value: Value {
        self.made.withLock { made in
            if let made { return made }
            let value = self.make()
            made = value
            return value
        }
    }
}

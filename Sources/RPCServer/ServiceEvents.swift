import Logging

/// Stable journal `MESSAGE_ID`s of the runtime's notable events, for
/// `journalctl MESSAGE_ID=…`. Never change a published id.
public enum ServiceEvent: String, Sendable, CaseIterable {
    case started = "751e0d9bf24d406a8786005d5c8ffaca"
    case ready = "7995a2ddace94f9cbe62cd7e4bd3a714"
    case stopping = "24b9a455b689470d9a8e648dca0b0fe3"
    case stopped = "aa99697db74a4be9be213636f0ec86d1"
    case requestFailed = "2dab54709cc24290bda0569945e37e4d"
    case connectionRejected = "601d80e71f604bc29dc67ecd124f2a34"
    case idleExit = "073a18a4623b4ac3bfa803a36c9dc8cc"

    /// Metadata that tags a log entry as this event.
    public var metadata: Logger.Metadata { ["message_id": .string(self.rawValue)] }
}

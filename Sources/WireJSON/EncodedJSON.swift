/// A JSON value encoded already, sent as it is: an item sent to many peers, or read back
/// from storage, need not go through the encoder again for every one.
public struct EncodedJSON: Sendable, Hashable {
    public let bytes: [UInt8]

    /// `bytes` must be one complete JSON value; nothing checks it.
    public init(_ bytes: [UInt8]) { self.bytes = bytes }
    public init(_ text: String) { self.bytes = Array(text.utf8) }

    public var text: String { String(decoding: self.bytes, as: UTF8.self) }
}

/// Whether bytes are valid UTF-8, as every frame and body off the network is checked
/// before it is parsed.
public enum UTF8Validation {
    /// Most texts are ASCII: those are checked eight bytes at a time with no copy, the rest
    /// by the standard library (which makes a `String` of them to say).
    public static func isValid(_ bytes: [UInt8]) -> Bool {
        let ascii = bytes.withUnsafeBytes { raw -> Bool in
            var index = 0
            let count = raw.count
            while index + 8 <= count {
                if raw.loadUnaligned(fromByteOffset: index, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 { return false }
                index += 8
            }
            while index < count {
                if raw[index] >= 0x80 { return false }
                index += 1
            }
            return true
        }
        return ascii || String(validating: bytes, as: UTF8.self) != nil
    }
}

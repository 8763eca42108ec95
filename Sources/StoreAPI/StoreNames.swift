/// The store's naming rules, for the store and for services that check names before
/// they reach it.
public enum StoreNames {
    /// Zone names: letters, digits, `-`, `_`, `.`; 1–255 characters.
    public static func isValidZone(_ name: String) -> Bool {
        // ASCII letters and digits, '-', '_', '.': checked byte by byte (it runs for every request).
        !name.isEmpty && name.utf8.count <= 255
            && name.utf8.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".")
            }
    }

    /// Zones whose names start with `_` belong to the services (pairing's state); devices never see them.
    public static func isInternalZone(_ name: String) -> Bool { name.hasPrefix("_") }

    public static let defaultZone = "default"

    /// Record names, family ids, device ids: 1–255 bytes, no control characters.
    public static func isValidIdentifier(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 255 && !Self.hasControlCharacter(name)
    }

    /// Whether `text` holds a control character (Unicode's Cc: U+0000–U+001F, U+007F–U+009F),
    /// found in its UTF-8 bytes: U+0080–U+009F are 0xC2 0x80–0x9F.
    static func hasControlCharacter(_ text: String) -> Bool {
        var afterC2 = false
        for byte in text.utf8 {
            if byte < 0x20 || byte == 0x7F || (afterC2 && byte <= 0x9F) { return true }
            afterC2 = byte == 0xC2
        }
        return false
    }
}

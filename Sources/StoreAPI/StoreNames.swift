/// The store's naming rules, for the store and for services that check names before
/// they reach it.
public enum StoreNames {
    /// Zone names: letters, digits, `-`, `_`, `.`; 1–255 characters.
    public static func isValidZone(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 255
            && name.unicodeScalars.allSatisfy { ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0))) || "-_.".unicodeScalars.contains($0) }
    }

    /// Zones whose names start with `_` belong to the services (pairing's state); devices never see them.
    public static func isInternalZone(_ name: String) -> Bool { name.hasPrefix("_") }

    public static let defaultZone = "default"

    /// Record names, family ids, device ids: 1–255 bytes, no control characters.
    public static func isValidIdentifier(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 255 && !name.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }
}

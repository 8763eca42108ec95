/// Text from a request made safe for a log line: one entry is one line on every target,
/// whatever a client put in a method name, a path or a header. Control characters (C0,
/// DEL, C1) and the Unicode line and paragraph separators become visible escapes
/// (`\n`, `\r`, `\t`, `\x1b`, `\u{2028}`), and a backslash is doubled, so an escape a client
/// wrote cannot pass for one made here. Strings are Unicode already: bytes that were not
/// UTF-8 arrive as U+FFFD.
public enum LogText {
    public static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: Self.needsEscape) else { return text }
        var result = ""
        result.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value):
                let hex = String(scalar.value, radix: 16)
                result += "\\x" + (hex.count < 2 ? "0" + hex : hex)
            case "\u{2028}", "\u{2029}":
                result += "\\u{\(String(scalar.value, radix: 16))}"
            default:
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar == "\\" || scalar == "\u{2028}" || scalar == "\u{2029}"
    }
}

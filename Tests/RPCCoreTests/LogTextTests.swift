import LineLogging
import Testing

/// Text from a request never makes a second log line, on any target.
@Suite("Log text from requests")
struct LogTextTests {
    @Test("newlines, CR, tabs, ANSI escapes, C1 controls and Unicode line separators become visible escapes", arguments: [
        ("probe.x\nFORGED-LINE level=error", #"probe.x\nFORGED-LINE level=error"#),
        ("a\r\nb", #"a\r\nb"#),
        ("tab\there", #"tab\there"#),
        ("\u{1B}[31mred\u{1B}[0m", #"\x1b[31mred\x1b[0m"#),
        ("nul\u{0}end", #"nul\x00end"#),
        ("del\u{7F}c1\u{85}", #"del\x7fc1\x85"#),
        ("line\u{2028}para\u{2029}", #"line\u{2028}para\u{2029}"#),
        (#"already\nescaped"#, #"already\\nescaped"#),
        ("plain.method", "plain.method"),
        ("émoji 🦊", "émoji 🦊"),
    ])
    func escaped(_ input: String, _ expected: String) {
        let output = LogText.escaped(input)
        #expect(output == expected)
        #expect(!output.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) || $0 == "\u{2028}" || $0 == "\u{2029}" })
    }

    @Test("bytes that are not UTF-8 arrive as U+FFFD and stay on the line")
    func invalidUTF8() {
        let text = String(decoding: [0x61, 0xFF, 0x0A, 0xFE, 0x62] as [UInt8], as: UTF8.self)
        #expect(LogText.escaped(text) == "a\u{FFFD}\\n\u{FFFD}b")
    }
}

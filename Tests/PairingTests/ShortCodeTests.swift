import Foundation
import PairingAPI
import Testing

/// The short code must read the same in any Matrix-style SAS implementation people know:
/// same table, same order, same names.
@Suite("Short verification code")
struct ShortCodeTests {
    /// Code points and descriptions of matrix-org/matrix-spec `data-definitions/sas-emoji.json`,
    /// numbers 0 to 63 (a variation selector follows some of them).
    static let matrixTable: [(UInt32, String)] = [
        (0x1F436, "Dog"), (0x1F431, "Cat"), (0x1F981, "Lion"), (0x1F40E, "Horse"), (0x1F984, "Unicorn"), (0x1F437, "Pig"),
        (0x1F418, "Elephant"), (0x1F430, "Rabbit"), (0x1F43C, "Panda"), (0x1F413, "Rooster"), (0x1F427, "Penguin"),
        (0x1F422, "Turtle"), (0x1F41F, "Fish"), (0x1F419, "Octopus"), (0x1F98B, "Butterfly"), (0x1F337, "Flower"),
        (0x1F333, "Tree"), (0x1F335, "Cactus"), (0x1F344, "Mushroom"), (0x1F30F, "Globe"), (0x1F319, "Moon"),
        (0x2601, "Cloud"), (0x1F525, "Fire"), (0x1F34C, "Banana"), (0x1F34E, "Apple"), (0x1F353, "Strawberry"),
        (0x1F33D, "Corn"), (0x1F355, "Pizza"), (0x1F382, "Cake"), (0x2764, "Heart"), (0x1F600, "Smiley"), (0x1F916, "Robot"),
        (0x1F3A9, "Hat"), (0x1F453, "Glasses"), (0x1F527, "Spanner"), (0x1F385, "Santa"), (0x1F44D, "Thumbs Up"),
        (0x2602, "Umbrella"), (0x231B, "Hourglass"), (0x23F0, "Clock"), (0x1F381, "Gift"), (0x1F4A1, "Light Bulb"),
        (0x1F4D5, "Book"), (0x270F, "Pencil"), (0x1F4CE, "Paperclip"), (0x2702, "Scissors"), (0x1F512, "Lock"),
        (0x1F511, "Key"), (0x1F528, "Hammer"), (0x260E, "Telephone"), (0x1F3C1, "Flag"), (0x1F682, "Train"),
        (0x1F6B2, "Bicycle"), (0x2708, "Aeroplane"), (0x1F680, "Rocket"), (0x1F3C6, "Trophy"), (0x26BD, "Ball"),
        (0x1F3B8, "Guitar"), (0x1F3BA, "Trumpet"), (0x1F514, "Bell"), (0x2693, "Anchor"), (0x1F3A7, "Headphones"),
        (0x1F4C1, "Folder"), (0x1F4CC, "Pin"),
    ]

    @Test("the emoji table is Matrix's SAS table, in its order, with its names")
    func tableIsMatrixs() {
        #expect(ShortCode.table.count == 64)
        for (number, (entry, expected)) in zip(ShortCode.table, Self.matrixTable).enumerated() {
            #expect(entry.emoji.unicodeScalars.first?.value == expected.0, "emoji \(number)")
            #expect(entry.emoji.unicodeScalars.dropFirst().allSatisfy { $0.value == 0xFE0F }, "emoji \(number)")
            #expect(entry.name == expected.1, "name \(number)")
        }
    }

    @Test("the code depends on every input, and is the same wherever it is computed")
    func codeDependsOnEveryInput() {
        let base = ShortCode(secret: "secret-1", invitationId: "inv", parentDeviceId: "mum", childDeviceId: "emma")
        #expect(base == ShortCode(secret: "secret-1", invitationId: "inv", parentDeviceId: "mum", childDeviceId: "emma"))
        #expect(base != ShortCode(secret: "secret-2", invitationId: "inv", parentDeviceId: "mum", childDeviceId: "emma"))
        #expect(base != ShortCode(secret: "secret-1", invitationId: "inv2", parentDeviceId: "mum", childDeviceId: "emma"))
        #expect(base != ShortCode(secret: "secret-1", invitationId: "inv", parentDeviceId: "dad", childDeviceId: "emma"))
        #expect(base != ShortCode(secret: "secret-1", invitationId: "inv", parentDeviceId: "mum", childDeviceId: "intruder"))
        #expect(base.emojiLine.split(separator: " ").count == 7)
        #expect(base.digitsLine.split(separator: " ").count == 3)
    }

    /// The test vector docs/protocol.md gives ("The short code"), so that a second
    /// implementation can check itself: HKDF-SHA256 over the secret's text as UTF-8 (not its
    /// base64url-decoded bytes, which give a1c95f94c286), with no salt.
    @Test("the documented test vector: HKDF over the secret's text, no salt; the doc states the same values")
    func documentedVector() throws {
        let code = ShortCode(secret: "kQ3v9Yx0Rz7mA1bC2dE4fG", invitationId: "0123456789abcdef", parentDeviceId: "mum-phone", childDeviceId: "emma-ipad")
        #expect(code.emoji.map(\.name) == ["Pin", "Train", "Dog", "Cat", "Pig", "Aeroplane", "Guitar"])
        #expect(code.digits == [9166, 1004, 3991])
        let doc = try String(contentsOfFile: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/protocol.md").path, encoding: .utf8)
        for text in ["kQ3v9Yx0Rz7mA1bC2dE4fG", "ff3001175e5b", "Pin, Train, Dog, Cat, Pig, Aeroplane, Guitar", "9166 1004 3991"] {
            #expect(doc.contains(text), "docs/protocol.md lacks \(text)")
        }
    }
}

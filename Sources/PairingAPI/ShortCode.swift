import Crypto
import Foundation

/// The short authentication string both screens show after a child accepts an invitation.
///
/// Derived as Matrix's SAS verification does: HKDF-SHA256 over the invitation secret, with
/// the invitation id and both device ids as context, gives 6 bytes; the first 42 bits pick
/// 7 emoji from a fixed table of 64, the first 39 bits make three 4-digit numbers. A
/// different child device (or a different parent device) gets a different code, which is
/// what the parent's comparison catches.
public struct ShortCode: Codable, Sendable, Hashable {
    public struct Emoji: Codable, Sendable, Hashable {
        public var emoji: String
        public var name: String
    }

    public var emoji: [Emoji]
    /// Three numbers between 1000 and 9191.
    public var digits: [Int]

    /// `secret` is the invitation secret as given in the pairing URI.
    public init(secret: String, invitationId: String, parentDeviceId: String, childDeviceId: String) {
        let info = "SCREENTIME_PAIRING_SAS|\(invitationId)|\(parentDeviceId)|\(childDeviceId)"
        let key = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: Data(secret.utf8)), info: Data(info.utf8), outputByteCount: 6)
        let bytes = key.withUnsafeBytes { Array($0) }
        var bits: UInt64 = 0
        for byte in bytes { bits = bits << 8 | UInt64(byte) }  // 48 bits, big-endian
        self.emoji = (0..<7).map { index in Self.table[Int((bits >> (42 - 6 * UInt64(index))) & 0x3F)] }
        let b = bytes.map(Int.init)
        self.digits = [
            (b[0] << 5 | b[1] >> 3) + 1000,
            ((b[1] & 0x7) << 10 | b[2] << 2 | b[3] >> 6) + 1000,
            ((b[3] & 0x3F) << 7 | b[4] >> 1) + 1000,
        ]
    }

    /// The emoji on one line, e.g. "🐶 🔑 🚀 …".
    public var emojiLine: String { self.emoji.map(\.emoji).joined(separator: " ") }
    /// Their names on one line, for reading aloud.
    public var namesLine: String { self.emoji.map(\.name).joined(separator: ", ") }
    /// The digits, e.g. "4821 1093 7710".
    public var digitsLine: String { self.digits.map(String.init).joined(separator: " ") }

    /// The 64 emoji and their names (the table of Matrix's SAS verification).
    public static let table: [Emoji] = [
        ("🐶", "Dog"), ("🐱", "Cat"), ("🦁", "Lion"), ("🐎", "Horse"), ("🦄", "Unicorn"), ("🐷", "Pig"), ("🐘", "Elephant"), ("🐰", "Rabbit"),
        ("🐼", "Panda"), ("🐓", "Rooster"), ("🐧", "Penguin"), ("🐢", "Turtle"), ("🐟", "Fish"), ("🐙", "Octopus"), ("🦋", "Butterfly"), ("🌷", "Flower"),
        ("🌳", "Tree"), ("🌵", "Cactus"), ("🍄", "Mushroom"), ("🌏", "Globe"), ("🌙", "Moon"), ("☁️", "Cloud"), ("🔥", "Fire"), ("🍌", "Banana"),
        ("🍎", "Apple"), ("🍓", "Strawberry"), ("🌽", "Corn"), ("🍕", "Pizza"), ("🎂", "Cake"), ("❤️", "Heart"), ("😀", "Smiley"), ("🤖", "Robot"),
        ("🎩", "Hat"), ("👓", "Glasses"), ("🔧", "Spanner"), ("🎅", "Santa"), ("👍", "Thumbs Up"), ("☂️", "Umbrella"), ("⌛", "Hourglass"), ("⏰", "Clock"),
        ("🎁", "Gift"), ("💡", "Light Bulb"), ("📕", "Book"), ("✏️", "Pencil"), ("📎", "Paperclip"), ("✂️", "Scissors"), ("🔒", "Lock"), ("🔑", "Key"),
        ("🔨", "Hammer"), ("☎️", "Telephone"), ("🏁", "Flag"), ("🚂", "Train"), ("🚲", "Bicycle"), ("✈️", "Aeroplane"), ("🚀", "Rocket"), ("🏆", "Trophy"),
        ("⚽", "Ball"), ("🎸", "Guitar"), ("🎺", "Trumpet"), ("🔔", "Bell"), ("⚓", "Anchor"), ("🎧", "Headphones"), ("📁", "Folder"), ("📌", "Pin"),
    ].map { Emoji(emoji: $0.0, name: $0.1) }
}

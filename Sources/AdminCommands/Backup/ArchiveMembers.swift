import Foundation
import Glibc

/// What a backup archive holds, read from its tar headers before anything is extracted,
/// and checked against what a backup can hold: a restore extracts nothing from an archive
/// with anything else in it (a path outside, a link, a device, a sparse or oversized file).
///
/// Read here rather than from `tar --list`, whose text mixes names with the rest of each
/// line: a name may hold anything.
enum ArchiveMembers {
    struct Member: Equatable {
        /// As in the archive (`./databases/store.sqlite`).
        var name: String
        /// The tar type flag (`0` a file, `5` a directory, `2` a symbolic link…).
        var type: UInt8
        var size: Int64
    }

    /// A member a backup never holds, in words.
    struct Refusal: ArchiveProblem {
        var description: String
    }

    /// The largest configuration file, key or manifest a backup holds.
    static let smallFileLimit: Int64 = 1 << 20

    /// Every member's header, in order. Throws for a file that is not a tar archive.
    static func list(_ path: String) throws -> [Member] {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw Refusal(description: "\(path) cannot be read") }
        defer { try? handle.close() }
        var members: [Member] = []
        var offset: UInt64 = 0
        while true {
            try handle.seek(toOffset: offset)
            let block = [UInt8](try handle.read(upToCount: 512) ?? Data())
            guard block.count == 512 else { throw Refusal(description: "it ends inside a tar header") }
            if block.allSatisfy({ $0 == 0 }) { return members }
            guard Self.checksumMatches(block) else { throw Refusal(description: "a tar header's checksum is wrong") }
            let size = try Self.size(Array(block[124..<136]))
            var name = Self.text(block[0..<100])
            // POSIX ustar splits a long name: the prefix before it.
            if Array(block[257..<263]) == Array("ustar\0".utf8) {
                let prefix = Self.text(block[345..<500])
                if !prefix.isEmpty { name = prefix + "/" + name }
            }
            members.append(Member(name: name, type: block[156], size: size))
            let data = (UInt64(size) + 511) / 512 * 512
            offset += 512 + data
        }
    }

    /// Refuses the archive unless each member is one a backup holds: the manifest, the
    /// databases, the gateway's key and certificate, the configuration files, and their
    /// directories; plain files and directories only, each within its size.
    static func check(_ members: [Member], room: Int64) throws {
        var total: Int64 = 0
        for member in members {
            var name = member.name
            while name.hasPrefix("./") { name.removeFirst(2) }
            if name.hasSuffix("/") { name.removeLast() }
            guard name.isEmpty || ServerArchive.isInside(name), !name.split(separator: "/").contains("."),
                  !member.name.hasPrefix("/") else {
                throw Refusal(description: "it holds \(member.name.debugDescription), a path outside the archive")
            }
            switch member.type {
            case UInt8(ascii: "5"):
                guard ["", "databases", "gateway", "etc"].contains(name) || name.hasPrefix("etc/") else {
                    throw Refusal(description: "it holds the directory \(member.name.debugDescription), which no backup has")
                }
            case UInt8(ascii: "0"), 0:
                let database = name.hasPrefix("databases/") && name.hasSuffix(".sqlite") && name.split(separator: "/").count == 2
                let small = name == "manifest.json" || name == "gateway/key.pem" || name == "gateway/certificate.pem" || name.hasPrefix("etc/")
                guard database || small else { throw Refusal(description: "it holds \(member.name.debugDescription), which no backup has") }
                guard database || member.size <= Self.smallFileLimit else {
                    throw Refusal(description: "\(member.name.debugDescription) is \(member.size) bytes, more than such a file ever is")
                }
                total += member.size
            default:
                throw Refusal(description: "it holds \(member.name.debugDescription) as \(Self.kind(member.type)), where a backup has only plain files and directories")
            }
        }
        guard total <= room else {
            throw Refusal(description: "its files come to \(total) bytes, more than the \(room) bytes free to unpack them")
        }
    }

    /// The bytes free where an archive would be unpacked.
    static func room(at directory: String) -> Int64 {
        var status = statvfs()
        guard statvfs(directory, &status) == 0 else { return .max }
        return Int64(status.f_bavail) * Int64(status.f_frsize)
    }

    static func kind(_ type: UInt8) -> String {
        switch type {
        case UInt8(ascii: "1"): "a hard link"
        case UInt8(ascii: "2"): "a symbolic link"
        case UInt8(ascii: "3"): "a character device"
        case UInt8(ascii: "4"): "a block device"
        case UInt8(ascii: "6"): "a FIFO"
        case UInt8(ascii: "S"): "a sparse file"
        case UInt8(ascii: "L"), UInt8(ascii: "K"): "a long name"
        case UInt8(ascii: "x"), UInt8(ascii: "g"): "extended attributes"
        default: "a member of type \(Character(UnicodeScalar(type)).debugDescription)"
        }
    }

    private static func text(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
    }

    /// Octal digits, or GNU's base-256 (high bit set) for a size past 8 GiB.
    private static func size(_ field: [UInt8]) throws -> Int64 {
        if let first = field.first, first & 0x80 != 0 {
            var value: Int64 = Int64(first & 0x7f)
            for byte in field.dropFirst() {
                guard value < Int64.max >> 8 else { throw Refusal(description: "a tar header's size is out of range") }
                value = value << 8 | Int64(byte)
            }
            return value
        }
        guard let value = Self.octal(field), value >= 0 else { throw Refusal(description: "a tar header's size is not a number") }
        return value
    }

    /// An octal number as tar writes it: leading spaces, digits, then a NUL or a space.
    private static func octal(_ field: [UInt8]) -> Int64? {
        let digits = field.drop { $0 == UInt8(ascii: " ") }.prefix { $0 != 0 && $0 != UInt8(ascii: " ") }
        return digits.isEmpty ? nil : Int64(String(decoding: digits, as: UTF8.self), radix: 8)
    }

    /// The header's checksum: the sum of its bytes with the checksum field read as spaces.
    private static func checksumMatches(_ block: [UInt8]) -> Bool {
        guard let stored = Self.octal(Array(block[148..<156])) else { return false }
        let sum = block.enumerated().reduce(0) { sum, item in sum + ((148..<156).contains(item.offset) ? 32 : Int(item.element)) }
        return sum == Int(stored)
    }
}

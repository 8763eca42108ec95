import Foundation

/// Makes `Snippets.swift` from docs/kit.md: each Swift block marked `<!-- compiled: KIND -->`
/// becomes code of this test target, so the manual's code is compiled with the tests.
///
/// - `statements`: the body of a function of ``KitDocs`` (which gives them `kit` and the
///   app's own names, `DocsContext.swift`).
/// - `declarations`: as written, at the top level.
/// - `ios`: as written, behind `#if os(iOS)` (UIKit, SwiftUI, UserNotifications).
/// - `cloudkit`: the CloudKit code it replaces, behind `#if canImport(CloudKit)`.
/// - `manifest`: a line of the app's Package.swift; checked, not compiled.
enum KitDocsSnippets {
    struct Block {
        var kind: String
        var line: Int
        var code: String
    }

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    static var manual: String { root.appendingPathComponent("docs/kit.md").path }
    static var generated: String { root.appendingPathComponent("Tests/ScreenTimeKitTests/Docs/Snippets.swift").path }

    /// The marked blocks, in order; a Swift block without a mark is an error (every block is compiled).
    static func blocks(_ markdown: String) throws -> [Block] {
        let lines = markdown.components(separatedBy: "\n")
        var blocks: [Block] = []
        var index = 0
        while index < lines.count {
            let trimmed = lines[index].trimmingCharacters(in: .whitespaces)
            guard trimmed == "```swift" else {
                index += 1
                continue
            }
            let indent = lines[index].prefix { $0 == " " }.count
            let mark = index > 0 ? lines[index - 1].trimmingCharacters(in: .whitespaces) : ""
            guard mark.hasPrefix("<!-- compiled: "), mark.hasSuffix(" -->") else {
                throw DocsError("docs/kit.md:\(index + 1): a Swift block with no <!-- compiled: KIND --> line before it")
            }
            let kind = String(mark.dropFirst("<!-- compiled: ".count).dropLast(" -->".count))
            var code: [String] = []
            index += 1
            while index < lines.count, lines[index].trimmingCharacters(in: .whitespaces) != "```" {
                code.append(String(lines[index].dropFirst(min(indent, lines[index].prefix { $0 == " " }.count))))
                index += 1
            }
            blocks.append(Block(kind: kind, line: index - code.count, code: code.joined(separator: "\n")))
            index += 1
        }
        return blocks
    }

    static func source(_ blocks: [Block]) throws -> String {
        var out = """
            // Made from docs/kit.md by KitDocsTests; do not edit (change the manual, then run
            // UPDATE_KIT_SNIPPETS=1 swift test --filter KitDocsTests).
            import Foundation
            import PairingAPI
            import PushAPI
            import ScreenTimeKit
            import StoreAPI
            import Synchronization
            #if os(iOS)
            import SwiftUI
            import UIKit
            import UserNotifications
            #endif
            #if canImport(CloudKit)
            import CloudKit
            #endif

            """
        // Named by their order, not their line: prose added to the manual changes nothing here.
        for (number, block) in zip(1..., blocks) {
            out += "\n// docs/kit.md, Swift block \(number)\n"
            switch block.kind {
            case "manifest":
                out += block.code.split(separator: "\n").map { "// " + $0 }.joined(separator: "\n") + "\n"
            case "statements":
                out += "extension KitDocs {\n    static func block\(number)() async throws {\n"
                out += block.code.split(separator: "\n", omittingEmptySubsequences: false).map { $0.isEmpty ? "" : "        " + $0 }.joined(separator: "\n")
                out += "\n    }\n}\n"
            case "declarations":
                out += block.code + "\n"
            case "ios":
                out += "#if os(iOS)\n" + block.code + "\n#endif\n"
            case "cloudkit":
                out += "#if canImport(CloudKit) && os(iOS)\n" + block.code + "\n#endif\n"
            default:
                throw DocsError("docs/kit.md:\(block.line): unknown kind \(block.kind) (statements, declarations, ios, cloudkit, manifest)")
            }
        }
        return out
    }

    struct DocsError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}

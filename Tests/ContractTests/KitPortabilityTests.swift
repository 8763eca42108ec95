import Foundation
import Testing
import TestSupport

/// ScreenTimeKit is linked into an iPhone app: the platforms it needs are declared, and
/// nothing of the server (systemd, the engines, the RPC server) or of Linux alone (Glibc
/// unguarded, /proc) enters the modules it is built from. Read from the package's own
/// description (`swift package dump-package`), so a dependency added to Package.swift is
/// checked the day it is added.
@Suite("ScreenTimeKit builds for iOS: platforms declared, no server or Linux-only module in its closure")
struct KitPortabilityTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    /// Targets that run only on the server.
    static let serverOnly: Set<String> = [
        "SystemdKit", "CSystemd", "RPCServer", "ServiceKit", "RecordStore", "PairingEngine", "PushEngine", "AggregatorEngine", "Gateway",
        "DurableSQLite", "ChangeFeed", "ProcessSpawn", "MemoryReturn", "SystemdContainer", "DevStack", "APNs", "RelayServer",
    ]

    struct Package: Decodable {
        struct Platform: Decodable {
            var platformName: String
            var version: String
        }

        struct Target: Decodable {
            var name: String
            var path: String?
            var type: String
            var dependencies: [Dependency]
        }

        /// `{"byName": [name, condition]}`, `{"target": [name, condition]}`, `{"product": [name, package, …]}`.
        struct Dependency: Decodable {
            var local: String?
            var product: String?
            var linuxOnly: Bool

            init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: Key.self)
                var local: String?, product: String?, condition: Condition?
                for key in container.allKeys {
                    var list = try container.nestedUnkeyedContainer(forKey: key)
                    let name = try list.decodeIfPresent(String.self)
                    if key.stringValue == "product" {
                        product = name
                        _ = try? list.decodeIfPresent(String.self)  // the package
                        _ = try? list.decodeNil()                   // module aliases
                    } else {
                        local = name
                    }
                    condition = try? list.decodeIfPresent(Condition.self)
                }
                self.local = local
                self.product = product
                self.linuxOnly = condition?.platformNames == ["linux"]
            }

            struct Condition: Decodable {
                var platformNames: [String]?
            }

            struct Key: CodingKey {
                var stringValue: String
                var intValue: Int? { nil }
                init(stringValue: String) { self.stringValue = stringValue }
                init?(intValue: Int) { nil }
            }
        }

        var platforms: [Platform]
        var targets: [Target]
    }

    static func package() async throws -> Package {
        // A scratch path of its own: the test run holds the lock on the package's .build.
        let scratch = TemporaryDirectory()
        let result = try await runCommand("/usr/bin/env", ["swift", "package", "--package-path", Self.root, "--scratch-path", scratch.path, "dump-package"],
                                          timeout: .seconds(120))
        guard result.status == 0 else { throw TestFailure("swift package dump-package failed: \(result.stderr)") }
        return try JSONDecoder().decode(Package.self, from: Data(result.stdout.utf8))
    }

    /// The kit's own targets and every local target they depend on (on an Apple platform:
    /// dependencies for Linux alone left out).
    static func closure(of name: String, in package: Package) -> [Package.Target] {
        let byName = Dictionary(package.targets.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        var seen: Set<String> = [], order: [Package.Target] = [], queue = [name]
        while let next = queue.popLast() {
            guard !seen.contains(next), let target = byName[next] else { continue }
            seen.insert(next)
            order.append(target)
            queue += target.dependencies.filter { !$0.linuxOnly }.compactMap(\.local)
        }
        return order
    }

    @Test("the package declares iOS 18 and macOS 15 (Synchronization's Mutex needs them)")
    func platforms() async throws {
        let platforms = try await Self.package().platforms
        #expect(platforms.contains { $0.platformName == "ios" && $0.version.hasPrefix("18") }, "\(platforms)")
        #expect(platforms.contains { $0.platformName == "macos" && $0.version.hasPrefix("15") }, "\(platforms)")
    }

    @Test("no server-only target, and no unguarded Linux-only import or /proc path, in the kit's dependency closure")
    func closureIsPortable() async throws {
        let package = try await Self.package()
        let closure = Self.closure(of: "ScreenTimeKit", in: package)
        #expect(closure.count > 5, "the closure was read: \(closure.map(\.name))")
        let server = closure.map(\.name).filter { Self.serverOnly.contains($0) }
        #expect(server.isEmpty, "server-only targets in the kit's closure: \(server)")
        for target in closure {
            let directory = Self.root + "/" + (target.path ?? "Sources/\(target.name)")
            guard let files = FileManager.default.enumerator(atPath: directory) else { continue }
            for case let file as String in files where file.hasSuffix(".swift") {
                let text = try String(contentsOfFile: directory + "/" + file, encoding: .utf8)
                let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
                for (index, line) in lines.enumerated() {
                    let trimmed = line.trimmingCharacters(in: .whitespaces)
                    let linuxOnly = ["import Glibc", "import Musl", "import CSystemd", "import SystemdKit", "import FoundationNetworking"].contains(trimmed)
                    // Guarded imports sit under an #if on the line before (canImport, os(Linux)).
                    let guarded = index > 0 && lines[index - 1].trimmingCharacters(in: .whitespaces).hasPrefix("#")
                    #expect(!linuxOnly || guarded, "\(target.name)/\(file):\(index + 1): \(trimmed) is Linux only; the kit builds for iOS")
                    #expect(!line.contains("\"/proc/"), "\(target.name)/\(file):\(index + 1) reads /proc, which iOS has not")
                }
            }
        }
    }
}

import Foundation

/// Where the package's executables were built: `$SCREENTIME_BIN_DIR`, else beside the
/// test bundle, else `.build/debug` of this checkout.
public enum Binaries {
    public static func path(_ name: String) -> String {
        for directory in self.candidates {
            let path = (directory as NSString).appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        fatalError("\(name) not found in \(self.candidates); run `swift build` first or set SCREENTIME_BIN_DIR")
    }

    private static var candidates: [String] {
        var list: [String] = []
        if let dir = ProcessInfo.processInfo.environment["SCREENTIME_BIN_DIR"] { list.append(dir) }
        for argument in CommandLine.arguments.prefix(3) where argument.hasPrefix("/") {
            var dir = (argument as NSString).deletingLastPathComponent
            while dir.hasSuffix(".xctest") || dir.contains(".xctest/") { dir = (dir as NSString).deletingLastPathComponent }
            list.append(dir)
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().path
        list.append(root + "/.build/debug")
        return list
    }
}

/// A fresh directory under /tmp, removed when the test ends.
public final class TemporaryDirectory: Sendable {
    public let path: String

    public init() {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("st-\(UUID().uuidString.prefix(8))")
        try! FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        self.path = base.path
    }

    public func file(_ name: String) -> String { (self.path as NSString).appendingPathComponent(name) }

    deinit { try? FileManager.default.removeItem(atPath: self.path) }
}

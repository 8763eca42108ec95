import Foundation

/// A simulated device: what a real app keeps in its keychain and settings. One terminal
/// can be the parent's phone (`--profile mum`) and another the child's tablet
/// (`--profile emma-ipad`).
struct Profile: Codable {
    enum Role: String, Codable { case parent, child }

    var name: String
    var role: Role
    var family: String
    var deviceId: String
    var deviceName: String
    /// The device credential (a secret: the file is readable by its owner only).
    var token: String
    /// A child device's id as paired (`emma`) and its zone.
    var childId: String?
    var zone: String?
    /// A parent's invitations still to confirm: id → secret, to show the short code again.
    var invitations: [String: String] = [:]
    /// The rules a child device has applied (from ConfigurationCommands), by app.
    var rules: [String: AppRule] = [:]
    /// Whether a child device has been told to shield its reward apps.
    var shielded = false
    /// The gateway this device was paired through (`--server`): its URLs and key pin.
    /// Every later command goes there, through ScreenTimeKit; none: the local sockets.
    var gatewayURLs: [String]?
    var gatewayPin: String?
    /// The version this device last told the parents it runs (its RegisteredDevice).
    var reportedAppVersion: String?

    struct AppRule: Codable, Equatable {
        var category: String
        var pointsPerMinute: Int?
        var isEnabled: Bool?
        var blockingEnabled: Bool?
    }
}

/// Profiles as files, one JSON file per profile in one directory.
struct ProfileStore {
    let directory: String

    /// `$SCREENTIME_PROFILES_DIR`; else `profiles` beside a `screentime-dev up` stack's
    /// runtime directory when that is the server in use (profiles belong to their
    /// server); else `$XDG_CONFIG_HOME/screentime/profiles` (`~/.config/...`).
    static func resolve(usingDevStack devStack: String?) -> ProfileStore {
        let environment = ProcessInfo.processInfo.environment
        if let explicit = environment["SCREENTIME_PROFILES_DIR"], !explicit.isEmpty { return ProfileStore(directory: explicit) }
        if let devStack { return ProfileStore(directory: (devStack as NSString).deletingLastPathComponent + "/profiles") }
        let config = environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? (NSHomeDirectory() + "/.config")
        return ProfileStore(directory: config + "/screentime/profiles")
    }

    func path(_ name: String) -> String { self.directory + "/\(name).json" }

    func load(_ name: String) throws(CLIError) -> Profile {
        guard let data = FileManager.default.contents(atPath: self.path(name)) else {
            let known = self.names()
            throw CLIError(.noProfile, "no profile named \(name) in \(self.directory)"
                + (known.isEmpty ? "; create one with parent enroll or child accept" : "; known: \(known.joined(separator: ", "))"))
        }
        do {
            return try JSONDecoder().decode(Profile.self, from: data)
        } catch {
            throw CLIError(.badProfile, "the profile \(self.path(name)) is not readable: \(error)")
        }
    }

    func save(_ profile: Profile) throws(CLIError) {
        do {
            try FileManager.default.createDirectory(atPath: self.directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            encoder.dateEncodingStrategy = .iso8601
            let path = self.path(profile.name)
            try encoder.encode(profile).write(to: URL(fileURLWithPath: path), options: .atomic)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        } catch {
            throw CLIError(.cannotWrite, "cannot write the profile \(self.path(profile.name)): \(error.localizedDescription)")
        }
    }

    func exists(_ name: String) -> Bool { FileManager.default.fileExists(atPath: self.path(name)) }

    func names() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: self.directory)) ?? [])
            .filter { $0.hasSuffix(".json") }.map { String($0.dropLast(5)) }.sorted()
    }
}

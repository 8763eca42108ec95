import ArgumentParser
import Foundation
import PairingAPI
import RPCClient
import RPCCore
import StoreAPI

/// What every device-mode command takes: how to reach the server, and which profile
/// (simulated device) to act as.
struct DeviceOptions: ParsableArguments {
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var remote: RemoteOptions

    @Option(name: .customLong("profile"), help: ArgumentHelp("The simulated device to act as.", discussion: "Default: $SCREENTIME_PROFILE. Profiles are kept in $SCREENTIME_PROFILES_DIR, else beside a screentime-dev stack (.screentime/profiles), else ~/.config/screentime/profiles.", valueName: "name"))
    var profileName: String?

    var profiles: ProfileStore {
        ProfileStore.resolve(usingDevStack: self.connection.usesDevStack ? ConnectionOptions.devStack : nil)
    }

    func requireProfileName() throws(CLIError) -> String {
        guard let name = self.profileName ?? ProcessInfo.processInfo.environment["SCREENTIME_PROFILE"].flatMap({ $0.isEmpty ? nil : $0 }) else {
            throw CLIError(.noProfile, "say which device to act as: --profile NAME (or set SCREENTIME_PROFILE)")
        }
        guard name.range(of: #"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"#, options: .regularExpression) != nil else {
            throw CLIError(.invalidInput, "a profile name is 1 to 64 letters, digits, '.', '_' or '-': \(name)")
        }
        return name
    }

    /// The profile's device, checked to have the role the command needs.
    func device(_ role: Profile.Role? = nil) throws(CLIError) -> Device {
        let profile = try self.profiles.load(try self.requireProfileName())
        if let role, profile.role != role {
            throw CLIError(.wrongRole, "\(profile.name) is a \(profile.role.rawValue) device; this command is for a \(role.rawValue) device")
        }
        return try Device(profile: profile, options: self)
    }

    /// A link with no credential (enrollment, accepting an invitation), to `target`.
    func anonymous(_ target: GatewayTarget?) -> DeviceLink {
        DeviceLink.open(self.connection, target: target, token: nil)
    }
}

extension ConnectionOptions {
    /// True when the sockets in use are a `screentime-dev up` stack's.
    var usesDevStack: Bool {
        guard let devStack = Self.devStack else { return false }
        return (self.socketPath(for: "store") as NSString).deletingLastPathComponent == devStack
    }

    func client(for service: String, token: String?) -> RPCClient {
        RPCClient(configuration: ClientConfiguration(
            socketPath: self.socketPath(for: service),
            callTimeout: .milliseconds(Int64(self.timeout * 1000)),
            connectTimeout: .milliseconds(500),
            auth: token.map(Auth.init(token:))
        ))
    }
}

/// A simulated device acting on the server with its credential, through ScreenTimeKit:
/// over the gateway when its profile (or `--server`) names one, else on the local sockets.
struct Device {
    var profile: Profile
    let options: DeviceOptions
    /// The gateway, or nil for the local sockets.
    let target: GatewayTarget?

    init(profile: Profile, options: DeviceOptions, target: GatewayTarget? = nil) throws(CLIError) {
        self.profile = profile
        self.options = options
        if let target {
            self.target = target
        } else {
            self.target = try GatewayTarget.resolve(options.remote, profile: profile)
        }
    }

    var family: String { self.profile.family }
    /// Every service through one link: the method names the service.
    var link: DeviceLink { DeviceLink.open(self.options.connection, target: self.target, token: self.profile.token) }
    var store: DeviceLink { self.link }
    var pairing: DeviceLink { self.link }
    var push: DeviceLink { self.link }
    var aggregator: DeviceLink { self.link }

    func save() throws(CLIError) { try self.options.profiles.save(self.profile) }

    /// Every record of a type a query returns, following its cursor.
    func all<F: RecordFields>(_ type: F.Type, zone: String? = nil, filters: [QueryFilter]? = nil, sort: QuerySort? = nil) async throws -> [TypedRecord<F>] {
        try await QueryParams(family: self.family, zone: zone, recordType: F.recordType, filters: filters, sort: sort, limit: QueryParams.maximumLimit)
            .allRecords { params in try await self.store.call(StoreMethods.query, params) }
            .map { record throws(RPCError) in try TypedRecord<F>(record) }
    }

    /// The active child devices of the family (a parent's view), optionally of one child;
    /// `includingRevoked`: also those removed from the family, whose usage still counts.
    func childDevices(of child: String? = nil, includingRevoked: Bool = false) async throws -> [DeviceInfo] {
        try await self.pairing.call(PairingMethods.listDevices, Empty()).devices.filter {
            $0.role == .child && ($0.status == .active || (includingRevoked && $0.status == .revoked)) && $0.zone != nil
                && (child == nil || $0.childId == child)
        }
    }

    /// The family's children's ids (from their ChildContext records), sorted.
    func childIds() async throws -> [String] {
        try await self.all(ChildContext.self, zone: StoreNames.defaultZone).compactMap { record in
            record.recordName.hasPrefix("child-") ? String(record.recordName.dropFirst("child-".count)) : nil
        }.sorted()
    }
}

/// A new device id: the profile's name and a random suffix, so two runs never collide.
func newDeviceId(for profile: String) -> String {
    let suffix = (0..<6).map { _ in String("0123456789abcdef".randomElement()!) }.joined()
    let base = profile.lowercased().filter { $0.isLetter || $0.isNumber || $0 == "-" }
    return "\(base.isEmpty ? "device" : String(base.prefix(40)))-\(suffix)"
}

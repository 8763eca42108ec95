import Crypto
import Foundation
import PairingAPI
import RPCCore
import ScreenTimeKit
import ServerVersion
import StoreAPI
import Synchronization

/// What a child's device does: accept an invitation, apply the parents' commands, upload
/// usage sessions.
extension Device {
    /// Reads the pairing URI (the QR code's text) with PairingAPI's one parser.
    static func pairingURI(_ text: String) throws(CLIError) -> PairingURI {
        guard let uri = PairingURI(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw CLIError(.invalidInput, "not a pairing link (screentime://pair?v=2&family=…&invitation=…&secret=…): \(text.prefix(120))")
        }
        return uri
    }

    /// Accepts an invitation as a new child device and saves its profile (pending until a
    /// parent confirms).
    /// Through the gateway when `--server` is given (its pin from `--pin` or the link);
    /// the profile keeps the gateway, so the device's later commands go there too.
    static func acceptInvitation(_ options: DeviceOptions, link: PairingURI, deviceName: String?) async throws -> (Device, AcceptedInvitation) {
        let name = try options.requireProfileName()
        if options.profiles.exists(name) {
            throw CLIError(.profileExists, "a profile named \(name) exists already (\(options.profiles.path(name))); pick another name or delete that file")
        }
        let deviceId = newDeviceId(for: name)
        let deviceName = deviceName ?? name
        var target = try GatewayTarget.resolve(options.remote, profile: nil, linkPin: link.pin)
        // No --server, and no server on this machine: the link says where its gateway is,
        // and its key's pin (a version 2 link), as it does for a phone scanning the code.
        if target == nil, let pin = link.pin, !link.urls.isEmpty,
           !FileManager.default.fileExists(atPath: options.connection.socketPath(for: "pairing")) {
            target = GatewayTarget(urls: link.urls, pin: try GatewayTarget.pin(pin))
        }
        let accepted = try await options.anonymous(target).call(PairingMethods.acceptInvitation, AcceptInvitationParams(
            family: link.family, invitationId: link.invitationId, secret: link.secret, deviceId: deviceId, deviceName: deviceName))
        var profile = Profile(name: name, role: .child, family: link.family, deviceId: deviceId, deviceName: deviceName,
                              token: accepted.credential.token, childId: accepted.childId, zone: accepted.zone)
        if let target {
            profile.gatewayURLs = target.urls
            profile.gatewayPin = target.pin.description
        }
        let device = try Device(profile: profile, options: options, target: target)
        try device.save()
        return (device, accepted)
    }

    var zone: String { self.profile.zone ?? StoreNames.defaultZone }

    /// The ConfigurationCommands waiting for this device, oldest first.
    func pendingCommands() async throws -> [TypedRecord<ConfigurationCommand>] {
        try await self.all(ConfigurationCommand.self, zone: self.zone, filters: [
            QueryFilter(ConfigurationCommand.Field.targetDeviceID, .equal, .string(self.profile.deviceId)),
            QueryFilter(ConfigurationCommand.Field.status, .equal, "pending"),
        ]).sorted { ($0.fields.createdAt ?? .distantPast, $0.recordName) < ($1.fields.createdAt ?? .distantPast, $1.recordName) }
    }

    /// Tells the parents which version this device runs (`screentimectl <version>`, its
    /// RegisteredDevice's `appVersion`), once per version.
    mutating func reportAppVersion() async throws {
        let version = "screentimectl \(ServerVersion.current)"
        guard self.profile.reportedAppVersion != version else { return }
        let saved = try await self.store.call(StoreMethods.modify, ModifyParams(family: self.family, zone: self.zone, saves: [
            .changes(RegisteredDevice.self, named: "device-\(self.profile.deviceId)", [.deviceID: .string(self.profile.deviceId), .appVersion: .string(version)]),
        ], savePolicy: .changedKeys, atomic: true))
        guard saved.allSucceeded else { return }
        self.profile.reportedAppVersion = version
        try self.save()
    }

    /// Applies a command on this device (its profile) and marks it executed (or failed) in
    /// the store. Returns what was done, in words.
    mutating func apply(_ command: TypedRecord<ConfigurationCommand>) async throws -> String {
        let type = command.fields.commandType
        let payload = command.fields.payloadJSON.flatMap { try? JSONDecoder().decode(JSONValue.self, from: Data($0.utf8)) } ?? [:]
        var done: String
        var failure: String?
        switch type {
        case ConfigurationSnapshot.commandType:
            if let snapshot = command.fields.configuration {
                // The whole configuration: what it does not name is no rule any more.
                self.profile.rules = Dictionary(snapshot.rules.map { rule in
                    (rule.bundleId, Profile.AppRule(category: rule.classification, pointsPerMinute: rule.pointsPerMinute.map(Int.init),
                                                    isEnabled: rule.isEnabled, blockingEnabled: rule.blockingEnabled))
                }, uniquingKeysWith: { _, last in last })
                self.profile.shielded = snapshot.shield.shielded
                let rules = snapshot.rules.map { rule in
                    "\(rule.bundleId) is \(Self.describe(Profile.AppRule(category: rule.classification, pointsPerMinute: rule.pointsPerMinute.map(Int.init), isEnabled: rule.isEnabled, blockingEnabled: rule.blockingEnabled)))"
                        + (rule.childOverride == true ? " (this child's own rule)" : "")
                }
                let shield = switch snapshot.shield.reason {
                case _ where !snapshot.shield.shielded: "reward apps open"
                case "paused": "reward apps paused by a parent"
                case "downtime": "reward apps shielded: downtime" + ((snapshot.shield.alwaysAllowed ?? []).isEmpty ? "" : " (always allowed: \((snapshot.shield.alwaysAllowed ?? []).joined(separator: ", ")))")
                case "dailyCap": "reward apps shielded: today's cap is reached"
                default: "reward apps shielded (earned time used up)"
                }
                done = "the family's rules applied (version \(snapshot.version)): " + (rules.isEmpty ? "no rule yet" : rules.joined(separator: "; ")) + "; " + shield
            } else {
                failure = "the configuration's payload is not a configuration snapshot"
                done = "could not apply: \(failure!)"
            }
        case "updateAppRule":
            // One app's rule, as parents' clients sent it before the server sent the whole
            // configuration: still applied if such a command waits on a device.
            if let bundleId = payload["bundleId"]?.stringValue, let category = payload["classification"]?.stringValue {
                let rule = Profile.AppRule(category: category, pointsPerMinute: payload["pointsPerMinute"]?.intValue.map(Int.init),
                                           isEnabled: payload["isEnabled"]?.boolValue, blockingEnabled: payload["blockingEnabled"]?.boolValue)
                self.profile.rules[bundleId] = rule
                done = "\(bundleId) is now \(Self.describe(rule))"
            } else {
                failure = "the command's payload has no bundleId or classification"
                done = "could not apply: \(failure!)"
            }
        case "shieldRewardApps":
            self.profile.shielded = true
            done = "reward apps shielded (earned time used up)"
        case "unshieldRewardApps":
            self.profile.shielded = false
            done = "reward apps unlocked (time earned again)"
        default:
            failure = "this device does not know commands of type \(type)"
            done = "skipped: \(failure!)"
        }
        try self.save()
        var status: [ConfigurationCommand.Field: JSONValue] = [.status: failure == nil ? "executed" : "failed", .executedAt: .date(Date())]
        if let failure { status[.errorMessage] = .string(failure) }
        var save = RecordSave.changes(ConfigurationCommand.self, named: command.recordName, status)
        var policy = SavePolicy.changedKeys
        if type == ConfigurationSnapshot.commandType {
            // The server rewrites its configuration in place: the status is for the version
            // applied only, so a newer one that came meanwhile stays pending.
            var applied = command
            applied.fields.status = failure == nil ? "executed" : "failed"
            applied.fields.executedAt = Date()
            applied.fields.errorMessage = failure
            save = try applied.save()
            policy = .ifServerRecordUnchanged
        }
        let saved = try await self.store.call(StoreMethods.modify, ModifyParams(family: self.family, zone: self.zone, saves: [save], savePolicy: policy, atomic: false))
        if saved.saved.first?.error?.code == .conflict { return done + " (a newer configuration came meanwhile: it is pending)" }
        guard saved.allSucceeded else { throw CLIError(.refused, "the command's status was not saved") }
        return done
    }

    static func describe(_ rule: Profile.AppRule) -> String {
        var words = [rule.category]
        if let points = rule.pointsPerMinute { words.append("\(points) points/min") }
        if rule.isEnabled == false { words.append("disabled") }
        if rule.blockingEnabled == true { words.append("blocked") }
        return words.joined(separator: ", ")
    }

    /// One usage session, as the device would upload it.
    struct Session {
        var app: String
        var start: Date
        var end: Date
        var category: String?
    }

    /// The session's category: as given, else this device's rule for the app.
    func category(of session: Session) throws(CLIError) -> String {
        if let category = session.category ?? self.profile.rules[session.app]?.category { return category }
        throw CLIError(.invalidInput, "no rule for \(session.app) on this device yet: give its --category (learning or reward), or apply the parent's rules (commands apply)")
    }

    /// Uploads sessions as UsageRecords, in atomic batches of at most 400. A record's name
    /// is derived from the device, app and times, so uploading the same session again
    /// changes nothing. `progress` gets the number uploaded so far.
    ///
    /// Through a gateway (a device away from the server) the batches go through
    /// ScreenTimeKit's offline queue, as an app's would: persisted first, then sent once
    /// each; what the gateway cannot take now waits for the next `usage sync` (or upload).
    /// `direct` sends them at once instead, failing if they cannot go.
    func upload(_ sessions: [Session], direct: Bool = false, progress: @escaping @Sendable (Int) -> Void = { _ in }) async throws -> Uploaded {
        var names: [String] = []
        var batches: [ModifyParams] = []
        for batch in stride(from: 0, to: sessions.count, by: ModifyParams.maximumItems).map({ Array(sessions[$0..<min($0 + ModifyParams.maximumItems, sessions.count)]) }) {
            var saves: [RecordSave] = []
            for session in batch {
                let category = try self.category(of: session)
                let seconds = Int64(session.end.timeIntervalSince(session.start).rounded(.down))
                let name = self.usageRecordName(session)
                names.append(name)
                let usage = UsageRecord(recordID: name, logicalID: session.app, bundleId: session.app, sessionStart: session.start, sessionEnd: session.end,
                                        totalSeconds: max(0, seconds), category: category, deviceID: self.profile.deviceId)
                saves.append(try .record(usage, named: name))
            }
            batches.append(ModifyParams(family: self.family, zone: self.zone, saves: saves, savePolicy: .allKeys, atomic: true))
        }
        if self.target != nil && !direct {
            let kit = try self.kit()
            _ = try kit.queue.enqueue(batches, label: "usage")
            let done = Mutex(0)
            let outcome = try await self.sync(kit) { event in
                if case .applied(let batch, _) = event {
                    progress(done.withLock { $0 += batch.params.saves?.count ?? 0; return $0 })
                }
            }
            if let (batch, error) = outcome.failed.first {
                throw CLIError(.refused, "the server refused batch \(batch.requestId): \(error.code): \(error.message) (it stays in the queue, set aside)")
            }
            if let error = outcome.notNow {
                // Not refused: kept, and sent once a parent has confirmed this device.
                guard error.code == .pairingUnconfirmed else { throw error }
                return Uploaded(names: names, queued: outcome.waiting, why: "this device waits for a parent to confirm it (comparing the short code)")
            }
            return Uploaded(names: names, queued: outcome.waiting, why: "the gateway is unreachable")
        }
        var done = 0
        for params in batches {
            let result = try await self.store.call(StoreMethods.modify, params)
            guard result.allSucceeded else { throw CLIError(.refused, "the store refused the batch") }
            done += params.saves?.count ?? 0
            progress(done)
        }
        return Uploaded(names: names, queued: 0)
    }

    /// What an upload did: the records' names, and how many batches wait in the queue for
    /// a gateway that could not be reached.
    struct Uploaded {
        var names: [String]
        var queued: Int
        /// Why what is queued waits, in words.
        var why = ""
    }

    func usageRecordName(_ session: Session) -> String {
        let key = "\(self.profile.deviceId)|\(session.app)|\(StoreDates.format(session.start))|\(StoreDates.format(session.end))"
        let digest = SHA256.hash(data: Data(key.utf8)).prefix(12).map { String(format: "%02x", $0) }.joined()
        return "usage-\(digest)"
    }
}

import RPCCore

/// An audit entry as a parent reads it: who (a device's name, "The server") and what they
/// did, in a sentence naming devices, children and roles, never ids, zones or action codes.
/// The dashboard's Activity page and `screentimectl audit` say it the same way.
public enum AuditWords {
    public struct Names: Sendable {
        /// Device ids to names.
        public var devices: [String: String]

        public init(_ devices: [DeviceInfo]) {
            self.devices = Dictionary(devices.map { ($0.deviceId, $0.deviceName ?? $0.deviceId) }, uniquingKeysWith: { first, _ in first })
        }

        public func device(_ id: String) -> String { self.devices[id] ?? "a device no longer in the family" }
    }

    /// An entry's metadata as far as its words may be shown as the server's: whole for an
    /// entry a service wrote (`createdBy` `local`), without `words` and `actorName` for one a
    /// device wrote (a device may write AuditEntry records; it may not speak for the server).
    public static func trusted(_ metadata: JSONValue?, createdBy: String?) -> JSONValue? {
        guard createdBy != "local", case .object(var fields)? = metadata else { return metadata }
        fields["words"] = nil
        fields["actorName"] = nil
        return .object(fields)
    }

    /// Who acted: the name the entry's server-written `metadata` gives (`actorName`), else
    /// the acting device's name, else "The server".
    public static func actor(_ actor: String, metadata: JSONValue? = nil, _ names: Names) -> String {
        if let name = metadata?["actorName"]?.stringValue { return name }
        if actor == "server" { return "The server" }
        if actor.hasPrefix("device:") { return names.device(String(actor.dropFirst("device:".count))) }
        return actor
    }

    public static func sentence(action: String, target: String, metadata: JSONValue?, _ names: Names) -> String {
        // The aggregator words what it audits (requests, grants, pauses, rules, settings).
        if let words = metadata?["words"]?.stringValue { return words }
        switch action {
        case "family.create": return "created the family"
        case "parent.invite": return target == "admin" ? "made a code for another admin parent to join" : "made a code for a co-parent to join"
        case "parent.enroll": return "joined the family as a parent"
        case "invitation.create":
            let child = metadata?["childId"]?.stringValue
            return child.map { "invited a device for \($0)" } ?? "invited a child's device"
        case "invitation.accept": return "accepted an invitation, waiting for a parent's confirmation"
        case "device.confirm": return "confirmed \(names.device(target))"
        case "invitation.reject": return "rejected \(names.devices[target] ?? "a device that asked to join")"
        case "device.revoke": return "removed \(names.device(target)) from the family"
        case "child.remove": return "removed \(target) and their devices"
        case "credential.rotate": return "renewed its credential"
        default: return action
        }
    }
}

import DurableSQLite
import Foundation
import GRDB
import PushAPI
import RPCCore
import StoreAPI

/// Who did a parenting action: a parent's or a child's device, or the server itself (an
/// expiry, a pause that ended).
struct Actor: Sendable {
    enum Kind: Sendable { case parent, child, server }
    var kind: Kind
    var deviceId: String
    /// As the family knows it: the parent's name, the child's, "The server".
    var name: String

    static let server = Actor(kind: .server, deviceId: "", name: "The server")

    /// The audit entry's `actor`.
    var auditActor: String { self.kind == .server ? "server" : "device:\(self.deviceId)" }
}

/// What parenting actions leave behind, in the transaction that makes them: an AuditEntry
/// for the family's log (written by the server, whatever client acted), and notifications
/// to the child's device or the parents.
enum FamilyLog {
    /// Queues an AuditEntry: `words` is the sentence after the actor's name ("approved 30
    /// min for Emma"), kept in `metadata` with the actor's name for the Activity page.
    static func audit(family: String, actor: Actor, action: String, target: String, words: String, metadata: [String: JSONValue] = [:],
                      at: Int64, named name: String? = nil, _ db: Database) throws {
        var data = metadata
        data["words"] = .string(words)
        // A parent the aggregator knows no name of: the reader names its device instead.
        if !actor.name.isEmpty { data["actorName"] = .string(actor.name) }
        let text = try RPCJSON.encodeText(JSONValue.object(data))
        let actorRef: RecordReference = actor.kind == .parent ? .inDefaultZone(ParentingNames.parentRecord(actor.deviceId)) : .inDefaultZone(family)
        let entry = AuditEntry(familyRef: .inDefaultZone(family), actorParentRef: actorRef, action: action, target: target,
                               timestamp: Millis.date(at), metadata: text, actor: actor.auditActor)
        try RecordOutboxRow.queue(entry, named: name ?? "audit-\(Self.randomHex())", family: family, db)
    }

    /// Queues a notification to one child device.
    static func notifyChild(family: String, deviceId: String, title: String, body: String?, data: [String: JSONValue], collapseKey: String, _ db: Database) throws {
        try NotifyOutboxRow.queue(NotifyParams(family: family, deviceId: deviceId, alert: Alert(title: title, body: body), data: data,
                                               collapseKey: collapseKey, priority: .high), db)
    }

    /// Queues a notification to every active parent device of the family: with an alert
    /// (high priority), or without one (a hint that replaces an undelivered alert of the
    /// same collapse key).
    static func notifyParents(family: String, alert: Alert?, data: [String: JSONValue], collapseKey: String, _ db: Database) throws {
        try NotifyOutboxRow.queue(NotifyParams(family: family, parents: true, alert: alert, data: data, collapseKey: collapseKey,
                                               priority: alert == nil ? nil : .high), db)
    }

    static func randomHex() -> String {
        (0..<8).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }
}

import DurableSQLite
import GRDB
import RPCCore
import StoreAPI

/// What a principal may do in one zone.
enum ZoneAccess: Int, Comparable, Sendable {
    case none = 0
    case read = 1
    case readWrite = 2

    static func < (lhs: ZoneAccess, rhs: ZoneAccess) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// The rules of "who may do what" (docs/protocol.md): local services do anything; parents
/// read and write their whole family (but the services' internal zones); a child device
/// reads the zones shared with it and writes there as its share and the schema allow.
enum AccessControl {
    static func requireLocal(_ principal: Principal, _ method: String) throws {
        guard case .device(let device) = principal else { return }
        throw RPCError(.forbidden, "\(method) is for local services on the server; device \(device.deviceId) may not call it")
    }

    static func requireFamily(_ principal: Principal, _ family: String) throws {
        guard case .device(let device) = principal, device.family != family else { return }
        throw RPCError(.forbidden, "device \(device.deviceId) does not belong to family \(family)")
    }

    static func requireParent(_ principal: Principal, _ family: String, _ what: String) throws {
        try requireFamily(principal, family)
        guard case .device(let device) = principal, !device.role.isParent else { return }
        throw RPCError(.forbidden, "only a parent may \(what); device \(device.deviceId) is a child device")
    }

    static func access(_ principal: Principal, to zone: ZoneRow, in db: Database) throws -> ZoneAccess {
        try self.access(principal, to: zone) { device in
            try String.fetchOne(cached: db, sql: "SELECT permission FROM shares WHERE zone_id = ? AND device_id = ?", arguments: [zone.id, device.deviceId])
        }
    }

    /// The same, with the child device's share in the zone (its `permission`, nil for
    /// none) found by `sharePermission`: read with the zone when it is read at all.
    static func access(_ principal: Principal, to zone: ZoneRow, sharePermission: (DeviceIdentity) throws -> String?) rethrows -> ZoneAccess {
        guard case .device(let device) = principal else { return .readWrite }
        guard device.family == zone.family, !Names.isInternalZone(zone.name) else { return .none }
        if device.role.isParent { return .readWrite }
        switch try sharePermission(device).flatMap(SharePermission.init(rawValue:)) {
        case .readWrite?: return .readWrite
        case .readOnly?: return .read
        case nil: return .none
        }
    }

    static func requireRead(_ principal: Principal, _ zone: ZoneRow, in db: Database) throws {
        try self.requireRead(principal, zone, access: try access(principal, to: zone, in: db))
    }

    static func requireRead(_ principal: Principal, _ zone: ZoneRow, access: ZoneAccess) throws {
        if access < .read {
            throw RPCError(.forbidden, "\(principal.name) may not read zone \(zone.name) of family \(zone.family)")
        }
    }

    /// Checks the zone-level right to write; record-type rules come per item.
    static func requireWrite(_ principal: Principal, _ zone: ZoneRow, in db: Database) throws {
        let access = try access(principal, to: zone, in: db)
        guard access == .readWrite else {
            throw RPCError(.forbidden, access == .read
                ? "\(principal.name) has read-only access to zone \(zone.name)"
                : "\(principal.name) may not write zone \(zone.name) of family \(zone.family)")
        }
        if case .device(let device) = principal, device.status == .pending {
            throw RPCError(.pairingUnconfirmed,
                "device \(device.deviceId) is paired but not confirmed yet; a parent must confirm the verification code first",
                data: ["deviceId": .string(device.deviceId)])
        }
    }

    /// The zones a principal may read in a family, for cross-zone queries and databaseChanges;
    /// nil means all of them.
    static func readableZoneIDs(_ principal: Principal, family: String, in db: Database) throws -> Set<Int64>? {
        guard case .device(let device) = principal else { return nil }
        guard device.family == family else { return [] }
        if device.role.isParent {
            return Set(try Int64.fetchAll(cached: db, sql: "SELECT id FROM zones WHERE family = ? AND deleted = 0 AND name NOT LIKE '\\_%' ESCAPE '\\'", arguments: [family]))
        }
        return Set(try Int64.fetchAll(cached: db, sql: """
            SELECT z.id FROM zones z JOIN shares s ON s.zone_id = z.id
            WHERE z.family = ? AND z.deleted = 0 AND s.device_id = ?
            """, arguments: [family, device.deviceId]))
    }

    /// Record-type rules for a child's save: the type must be child-writable, only the
    /// allowed fields may change, and the owner field must name the child itself.
    static func checkChildSave(
        _ device: DeviceIdentity, type: RecordTypeDefinition, existing: [String: JSONValue]?, merged: [String: JSONValue]
    ) throws(ItemError) {
        switch type.childAccess {
        case .none:
            throw ItemError(code: .forbidden, message: "child devices may not write \(type.name) records")
        case .write:
            break
        case .updateFields:
            guard let existing else {
                throw ItemError(code: .forbidden, message: "child devices may not create \(type.name) records, only update \(type.childWritableFields.sorted().joined(separator: ", "))")
            }
            for name in Set(existing.keys).union(merged.keys) where existing[name] != merged[name] && !type.childWritableFields.contains(name) {
                throw ItemError(code: .forbidden, message: "child devices may change only \(type.childWritableFields.sorted().joined(separator: ", ")) of \(type.name) records, not \(name)", field: name)
            }
        }
        if let owner = type.ownerField, merged[owner] != .string(device.deviceId) {
            throw ItemError(code: .forbidden, message: "field \(owner) must be this device's own id (\(device.deviceId))", field: owner)
        }
    }

    static func checkChildDelete(_ device: DeviceIdentity, type: RecordTypeDefinition?, existing: [String: JSONValue]) throws(ItemError) {
        guard let type, type.childAccess == .write else {
            throw ItemError(code: .forbidden, message: "child devices may not delete \(type?.name ?? "these") records")
        }
        if let owner = type.ownerField, existing[owner] != .string(device.deviceId) {
            throw ItemError(code: .forbidden, message: "child devices may delete only their own \(type.name) records", field: owner)
        }
    }
}

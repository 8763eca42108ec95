import Foundation
import RPCCore

/// `store.createFamily`: a family is the top-level scope (CloudKit's database). It starts
/// with one zone, `default`.
public struct CreateFamilyParams: Codable, Sendable, Hashable {
    /// The family's identifier (opaque; a UUID is a good choice).
    public var family: String
    public init(family: String) { self.family = family }
}

public struct FamilyInfo: Codable, Sendable, Hashable {
    public var family: String
    public var createdAt: Date
    /// Live zones, `default` included.
    public var zones: Int
    public init(family: String, createdAt: Date, zones: Int) {
        self.family = family
        self.createdAt = createdAt
        self.zones = zones
    }
}

public struct ListFamiliesResult: Codable, Sendable, Hashable {
    public var families: [FamilyInfo]
    public init(families: [FamilyInfo]) { self.families = families }
}

/// Names one zone of one family.
public struct ZoneParams: Codable, Sendable, Hashable {
    public var family: String
    /// Letters, digits, `-`, `_`, `.`; at most 255 characters. Names starting with `_`
    /// are internal: only local services see them.
    public var zone: String
    public init(family: String, zone: String) {
        self.family = family
        self.zone = zone
    }
}

public struct FamilyParams: Codable, Sendable, Hashable {
    public var family: String
    public init(family: String) { self.family = family }
}

public struct ZoneInfo: Codable, Sendable, Hashable {
    public var name: String
    public var createdAt: Date
    /// Devices the zone is shared with (0 when not shared).
    public var participants: Int
    public init(name: String, createdAt: Date, participants: Int) {
        self.name = name
        self.createdAt = createdAt
        self.participants = participants
    }
}

public struct ListZonesResult: Codable, Sendable, Hashable {
    public var zones: [ZoneInfo]
    public init(zones: [ZoneInfo]) { self.zones = zones }
}

public struct DeleteZoneResult: Codable, Sendable, Hashable {
    /// Records deleted with the zone.
    public var recordsDeleted: Int
    public init(recordsDeleted: Int) { self.recordsDeleted = recordsDeleted }
}

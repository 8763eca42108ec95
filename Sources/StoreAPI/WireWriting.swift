import Foundation
import RPCCore

// The store's hot replies written by hand (see `JSONWritable`): a record read goes from
// the database row to the wire without any encoder. Member names and omissions are those
// of the synthesized `Encodable` forms; ContractTests checks each against Foundation's.

extension Record: JSONWritable {
    public func write(to writer: inout JSONWriter) throws {
        try self.write(to: &writer, fieldsText: nil)
    }

    /// With `fieldsText`, the record's fields are that JSON object's text, written as it is
    /// (the store's stored text: a record read to be sent is not parsed and written again),
    /// and ``fields`` is not looked at.
    public func write(to writer: inout JSONWriter, fieldsText: String?) throws {
        writer.beginObject()
        writer.member("recordType", self.recordType)
        writer.member("recordName", self.recordName)
        writer.member("zone", self.zone)
        writer.member("fields")
        if let fieldsText { writer.raw(text: fieldsText) } else { try writer.value(.object(self.fields)) }
        writer.member("changeTag", self.changeTag)
        writer.member("createdAt", self.createdAt)
        writer.member("modifiedAt", self.modifiedAt)
        writer.member("createdBy", self.createdBy)
        writer.member("modifiedBy", self.modifiedBy)
        writer.endObject()
    }
}

extension RecordID: JSONWritable {
    public func write(to writer: inout JSONWriter) throws {
        writer.beginObject()
        writer.member("zone", self.zone)
        writer.member("recordName", self.recordName)
        writer.member("recordType", self.recordType)
        writer.endObject()
    }
}

extension FetchResult: JSONWritable {
    public func write(to writer: inout JSONWriter) throws {
        writer.beginObject()
        writer.member("records")
        try writer.array(self.records)
        writer.member("missing", self.missing)
        writer.endObject()
    }
}

extension QueryResult: JSONWritable {
    public func write(to writer: inout JSONWriter) throws {
        writer.beginObject()
        writer.member("records")
        try writer.array(self.records)
        writer.member("cursor", self.cursor)
        writer.endObject()
    }
}

extension ZoneChangesResult: JSONWritable {
    public func write(to writer: inout JSONWriter) throws {
        writer.beginObject()
        writer.member("records")
        try writer.array(self.records)
        writer.member("deletions")
        try writer.array(self.deletions)
        writer.member("token", self.token)
        writer.member("moreComing", self.moreComing)
        writer.endObject()
    }
}

extension ChangeEvent: JSONWritable {
    public func write(to writer: inout JSONWriter) throws {
        writer.beginObject()
        writer.member("seq", self.seq)
        writer.member("family", self.family)
        writer.member("zone", self.zone)
        writer.member("kind", self.kind.rawValue)
        writer.member("recordType", self.recordType)
        writer.member("recordName", self.recordName)
        writer.member("changeTag", self.changeTag)
        if let record = self.record {
            writer.member("record")
            try record.write(to: &writer)
        }
        writer.member("at", self.at)
        writer.member("created", self.created)
        if let deletedFields = self.deletedFields {
            writer.member("deletedFields")
            try writer.value(.object(deletedFields))
        }
        if let deletedBy = self.deletedBy { writer.member("deletedBy", deletedBy) }
        try writer.member("credential", encodable: self.credential)  // rare: its Encodable form
        writer.endObject()
    }
}

extension SaveOutcome: JSONWritable {
    public func write(to writer: inout JSONWriter) throws {
        writer.beginObject()
        writer.member("recordName", self.recordName)
        if let record = self.record {
            writer.member("record")
            try record.write(to: &writer)
        }
        try writer.member("error", encodable: self.error)  // rare: its Encodable form
        writer.endObject()
    }
}

extension DeleteOutcome: JSONWritable {
    public func write(to writer: inout JSONWriter) throws {
        writer.beginObject()
        writer.member("recordName", self.recordName)
        writer.member("deleted", self.deleted)
        try writer.member("error", encodable: self.error)
        writer.endObject()
    }
}

extension ModifyResult: JSONWritable {
    public func write(to writer: inout JSONWriter) throws {
        writer.beginObject()
        writer.member("saved")
        try writer.array(self.saved)
        writer.member("deleted")
        try writer.array(self.deleted)
        writer.member("cascaded")
        try writer.array(self.cascaded)
        writer.member("replayed", self.replayed)
        writer.endObject()
    }
}

// Requests too: a client writing batches of records (the aggregator, devices) skips the
// encoder as well.

extension RecordSave: JSONWritable {
    public func write(to writer: inout JSONWriter) throws {
        writer.beginObject()
        writer.member("recordType", self.recordType)
        writer.member("recordName", self.recordName)
        writer.member("fields")
        try writer.value(.object(self.fields))
        writer.member("changeTag", self.changeTag)
        writer.endObject()
    }
}

extension RecordDelete: JSONWritable {
    public func write(to writer: inout JSONWriter) throws {
        writer.beginObject()
        writer.member("recordName", self.recordName)
        writer.member("changeTag", self.changeTag)
        writer.endObject()
    }
}

extension ModifyParams: JSONWritable {
    public func write(to writer: inout JSONWriter) throws {
        writer.beginObject()
        writer.member("family", self.family)
        writer.member("zone", self.zone)
        if let saves = self.saves {
            writer.member("saves")
            try writer.array(saves)
        }
        if let deletes = self.deletes {
            writer.member("deletes")
            try writer.array(deletes)
        }
        writer.member("savePolicy", self.savePolicy?.rawValue)
        writer.member("atomic", self.atomic)
        writer.member("requestId", self.requestId)
        writer.member("deviceClock", self.deviceClock)
        writer.endObject()
    }
}

extension FetchParams: JSONWritable {
    public func write(to writer: inout JSONWriter) throws {
        writer.beginObject()
        writer.member("family", self.family)
        writer.member("zone", self.zone)
        writer.member("recordNames", self.recordNames)
        writer.endObject()
    }
}

// And read back by hand (see `JSONReadable`): the records of the clients that follow
// store.watch, the busiest calls' parameters (read by the store) and results (read by its
// clients). Anything but the exact shape falls back to `Decodable`, which then accepts or
// refuses as it always did.

extension ModifyParams: JSONReadable {
    public init(reading object: JSONObjectReader) throws {
        self.init(
            family: try object.string("family"), zone: try object.string("zone"),
            saves: try object.readIfPresent("saves", asArrayOf: RecordSave.self),
            deletes: try object.readIfPresent("deletes", asArrayOf: RecordDelete.self),
            savePolicy: try object.enumerationIfPresent("savePolicy", as: SavePolicy.self),
            atomic: try object.boolIfPresent("atomic"), requestId: try object.stringIfPresent("requestId"),
            deviceClock: try object.dateIfPresent("deviceClock"))
    }
}

extension RecordSave: JSONReadable {
    public init(reading object: JSONObjectReader) throws {
        self.init(recordType: try object.string("recordType"), recordName: try object.string("recordName"),
                  fields: try object.object("fields"), changeTag: try object.stringIfPresent("changeTag"))
    }
}

extension RecordDelete: JSONReadable {
    public init(reading object: JSONObjectReader) throws {
        self.init(recordName: try object.string("recordName"), changeTag: try object.stringIfPresent("changeTag"))
    }
}

extension FetchParams: JSONReadable {
    public init(reading object: JSONObjectReader) throws {
        self.init(family: try object.string("family"), zone: try object.string("zone"), recordNames: try object.strings("recordNames"))
    }
}

extension FetchResult: JSONReadable {
    public init(reading object: JSONObjectReader) throws {
        self.init(records: try object.read("records", asArrayOf: Record.self), missing: try object.strings("missing"))
    }
}

extension ModifyResult: JSONReadable {
    public init(reading object: JSONObjectReader) throws {
        self.init(
            saved: try object.read("saved", asArrayOf: SaveOutcome.self), deleted: try object.read("deleted", asArrayOf: DeleteOutcome.self),
            cascaded: try object.read("cascaded", asArrayOf: RecordID.self), replayed: try object.bool("replayed"))
    }
}

extension SaveOutcome: JSONReadable {
    public init(reading object: JSONObjectReader) throws {
        self.init(recordName: try object.string("recordName"), record: try object.readIfPresent("record", as: Record.self),
                  error: try ItemError.readIfPresent("error", in: object))
    }
}

extension DeleteOutcome: JSONReadable {
    public init(reading object: JSONObjectReader) throws {
        self.init(recordName: try object.string("recordName"), deleted: try object.boolIfPresent("deleted"),
                  error: try ItemError.readIfPresent("error", in: object))
    }
}

extension ItemError {
    /// An item's error (the rare case) through `Decodable`.
    static func readIfPresent(_ key: String, in object: JSONObjectReader) throws -> ItemError? {
        switch object.value(key) {
        case nil, .null?: return nil
        case let value?: return try JSONValueDecoding.decode(ItemError.self, from: value)
        }
    }
}

extension RecordID: JSONReadable {
    public init(reading object: JSONObjectReader) throws {
        self.init(zone: try object.string("zone"), recordName: try object.string("recordName"), recordType: try object.stringIfPresent("recordType"))
    }
}

extension Record: JSONReadable {
    public init(reading object: JSONObjectReader) throws {
        self.init(
            recordType: try object.string("recordType"), recordName: try object.string("recordName"), zone: try object.string("zone"),
            fields: try object.object("fields"), changeTag: try object.string("changeTag"),
            createdAt: try object.date("createdAt"), modifiedAt: try object.date("modifiedAt"),
            createdBy: try object.string("createdBy"), modifiedBy: try object.string("modifiedBy"))
    }
}

extension ChangeEvent: JSONReadable {
    public init(reading object: JSONObjectReader) throws {
        self.init(
            seq: try object.int64("seq"), family: try object.string("family"), zone: try object.string("zone"),
            kind: try object.enumeration("kind", as: ChangeKind.self), recordType: try object.stringIfPresent("recordType"),
            recordName: try object.stringIfPresent("recordName"), changeTag: try object.stringIfPresent("changeTag"),
            record: try object.readIfPresent("record", as: Record.self), at: try object.date("at"),
            created: try object.boolIfPresent("created"), deletedFields: try object.objectIfPresent("deletedFields"),
            deletedBy: try object.stringIfPresent("deletedBy"),
            credential: try object.value("credential").flatMap { value in
                value == .null ? nil : try JSONValueDecoding.decode(CredentialEntry.self, from: value)
            })
    }
}

extension DailySummary.AppUsage: JSONWritable {
    public func write(to writer: inout JSONWriter) throws {
        writer.beginObject()
        writer.member("app", self.app)
        writer.member("category", self.category)
        writer.member("seconds", self.seconds)
        writer.member("points", self.points)
        writer.endObject()
    }
}

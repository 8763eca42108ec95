import Foundation
import RPCCore
import StoreAPI

/// A save refused because the server's record changed since the caller's copy (save only
/// if unchanged, else rebase). Carries what the server has now, to rebase on.
public struct SaveConflict: Error, Sendable, CustomStringConvertible {
    public var zone: String
    /// The save that was refused.
    public var attempted: RecordSave
    /// The record as the server has it now; nil when it was deleted meanwhile.
    public var serverRecord: Record?
    public var message: String

    public var description: String { "conflict: \(self.message)" }

    /// The server's record, typed.
    public func server<F: RecordFields>(as type: F.Type) throws(RPCError) -> TypedRecord<F>? {
        try self.serverRecord.map { record throws(RPCError) in try TypedRecord<F>(record) }
    }
}

/// The merge of concurrent edits, field by field.
///
/// - A field the caller changed (it differs from the copy the caller started from) takes
///   the caller's value: the caller's save comes later by server time, so it is the last
///   writer of that field.
/// - A field the caller did not change takes the server's value (another device's later
///   write is kept).
/// - A set-like list (`deviceIds`, `pairedDeviceIds`, …) changed on both sides merges by
///   union: what either side added stays, what the caller removed goes.
public enum Rebase {
    public static func merge(base: [String: JSONValue]?, mine: [String: JSONValue], server: [String: JSONValue], setFields: Set<String>) -> [String: JSONValue] {
        var merged = server
        let keys = Set(mine.keys).union(base.map { Set($0.keys) } ?? [])
        for key in keys {
            let original = base?[key]
            let ours = mine[key]
            guard ours != original || base == nil else { continue }  // unchanged by us: the server's stands
            if setFields.contains(key), case .array(let theirs)? = server[key] {
                let ourList: [JSONValue]
                if case .array(let list)? = ours { ourList = list } else { ourList = [] }
                var originalList: [JSONValue] = []
                if case .array(let list)? = original { originalList = list }
                let removed = Set(originalList).subtracting(ourList)
                var union: [JSONValue] = []
                for element in theirs + ourList where !removed.contains(element) && !union.contains(element) { union.append(element) }
                merged[key] = .array(union)
            } else if let ours {
                merged[key] = ours
            } else {
                merged.removeValue(forKey: key)
            }
        }
        return merged
    }

    /// The typed form: `base` is the copy the caller started from (nil when unknown: then
    /// every field the caller sets wins), `mine` the caller's edited copy, and the result
    /// the record to save, carrying the server's change tag.
    public static func merge<F: RecordFields>(base: TypedRecord<F>?, mine: TypedRecord<F>, server: TypedRecord<F>) throws(RPCError) -> TypedRecord<F> {
        let fields = self.merge(
            base: try base.map { record throws(RPCError) in try TypedRecord<F>.wireFields(record.fields) },
            mine: try TypedRecord<F>.wireFields(mine.fields),
            server: try TypedRecord<F>.wireFields(server.fields),
            setFields: F.setFieldNames)
        var merged = server
        merged.fields = try TypedRecord<F>.fields(from: fields, what: "the merged \(F.recordType)")
        return merged
    }
}

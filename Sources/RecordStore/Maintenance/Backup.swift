import Foundation
import GRDB
import RPCCore
import StoreAPI

/// An online backup with SQLite's backup API, from one read snapshot: consistent, and
/// writers go on meanwhile (WAL).
enum Backup {
    static func resolve(_ path: String?, stateDirectory: String, now: Date = Date()) throws -> String {
        let directory = (stateDirectory as NSString).appendingPathComponent("backups")
        guard let path, !path.isEmpty else {
            let stamp = now.formatted(.iso8601.year().month().day().dateSeparator(.omitted).time(includingFractionalSeconds: false).timeSeparator(.omitted))
            return (directory as NSString).appendingPathComponent("store-\(stamp).sqlite")
        }
        return path.hasPrefix("/") ? path : (directory as NSString).appendingPathComponent(path)
    }

    static func run(pool: DatabasePool, to path: String) async throws -> (bytes: Int64, lastSeq: Int64) {
        guard !FileManager.default.fileExists(atPath: path) else {
            throw RPCError(.conflict, "\(path) already exists; choose another path or move the old backup away", data: ["path": .string(path)])
        }
        let directory = (path as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw RPCError(.invalidParams, "cannot create \(directory): \(error.localizedDescription)", data: ["parameter": "params.path"])
        }
        let partial = path + ".partial"
        try? FileManager.default.removeItem(atPath: partial)
        do {
            let destination = try DatabaseQueue(path: partial)
            let lastSeq = try await pool.read { db -> Int64 in
                let head = try StoreDatabase.head(db)
                try destination.writeWithoutTransaction { try db.backup(to: $0) }
                return head
            }
            try destination.close()
            try FileManager.default.moveItem(atPath: partial, toPath: path)
            let bytes = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value ?? 0
            return (bytes, lastSeq)
        } catch let error as RPCError {
            try? FileManager.default.removeItem(atPath: partial)
            throw error
        } catch {
            try? FileManager.default.removeItem(atPath: partial)
            throw RPCError(.unavailable, "the backup to \(path) failed: \(error)", data: ["path": .string(path)])
        }
    }
}

import AggregatorAPI
import DurableSQLite
import Foundation
import GRDB
import PushAPI
import RPCCore

/// The scheduled backups' outcomes (`server_backups`, one row). A failure alerts every parent
/// of every family once: the first of a streak; the first success after a streak says so too.
/// The journal has every run (the backup service logs it); parents are not told each night.
enum ServerBackups {
    static func report(_ report: BackupReport, now: Date, _ db: Database) throws -> ServerBackupState {
        guard report.succeeded || !(report.problem ?? "").isEmpty else {
            throw RPCError(.invalidParams, "params.problem: a failed backup says what failed, as a sentence for the parents")
        }
        let at = Millis.of(now)
        var state = try Self.state(db)
        let wasFailing = state.failingSince != nil
        state.lastRunAt = at
        state.lastSucceeded = report.succeeded
        if report.succeeded {
            state.lastSuccessAt = at
            state.archive = report.archive
            state.bytes = report.bytes
            state.copiedTo = report.copiedTo
            state.failingSince = nil
            state.problem = nil
        } else {
            state.failingSince = state.failingSince ?? at
            state.problem = report.problem
        }
        try db.execute(sql: """
            INSERT OR REPLACE INTO server_backups(id, last_run_ms, last_succeeded, last_success_ms, archive, bytes, copied_to, failing_since_ms, problem)
            VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?)
            """, arguments: [at, report.succeeded, state.lastSuccessAt, state.archive, state.bytes, state.copiedTo, state.failingSince, state.problem])
        var alert: (Alert, String)?
        if !report.succeeded && !wasFailing {
            alert = (Alert(title: "The server's backup failed",
                           body: "The server's nightly backup failed: \(report.problem ?? "").\nThe server keeps working; whoever runs it should look (journalctl -u screentime-backup)."),
                     "backupFailed")
        } else if report.succeeded && wasFailing {
            alert = (Alert(title: "The server's backups work again", body: "Tonight's backup was made and checked\(report.copiedTo.map { ", and copied to \($0)" } ?? "")."),
                     "backupRecovered")
        }
        if let (message, event) = alert {
            for family in try String.fetchAll(db, sql: "SELECT family FROM families") {
                try FamilyLog.notifyParents(family: family, alert: message, data: ["event": .string(event)], collapseKey: "server-backup", db)
            }
        }
        state.parentsAlerted = alert != nil
        return state
    }

    static func state(_ db: Database) throws -> ServerBackupState {
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM server_backups WHERE id = 1") else { return ServerBackupState() }
        return ServerBackupState(lastRunAt: row["last_run_ms"], lastSucceeded: row["last_succeeded"], lastSuccessAt: row["last_success_ms"],
                                 archive: row["archive"], bytes: row["bytes"], copiedTo: row["copied_to"],
                                 failingSince: row["failing_since_ms"], problem: row["problem"])
    }
}

import Foundation
import RPCCore

// The server's scheduled backups as the family sees them: each run's outcome, told by the
// backup service (`screentimectl backup scheduled`), kept by the aggregator, shown in the
// dashboard's Settings; a failure alerts every parent once until a backup succeeds again.

/// `aggregator.backupReport`: one scheduled backup's outcome (local callers only).
public struct BackupReport: Codable, Sendable, Hashable {
    public var succeeded: Bool
    /// The archive's file name.
    public var archive: String?
    public var bytes: Int64?
    /// Where it was copied to as well (`--copy-to`).
    public var copiedTo: String?
    /// A failure, as a sentence a parent can read ("the backup disk is not mounted").
    public var problem: String?

    public init(succeeded: Bool, archive: String? = nil, bytes: Int64? = nil, copiedTo: String? = nil, problem: String? = nil) {
        self.succeeded = succeeded
        self.archive = archive
        self.bytes = bytes
        self.copiedTo = copiedTo
        self.problem = problem
    }
}

/// `aggregator.backupState`, and the answer to `aggregator.backupReport`.
public struct ServerBackupState: Codable, Sendable, Hashable {
    /// When a scheduled backup last ran (ms since the epoch); absent: never.
    public var lastRunAt: Int64?
    public var lastSucceeded: Bool?
    /// The last backup that worked: when, its archive, size and copy.
    public var lastSuccessAt: Int64?
    public var archive: String?
    public var bytes: Int64?
    public var copiedTo: String?
    /// While backups fail: since when, and the last run's problem.
    public var failingSince: Int64?
    public var problem: String?
    /// `backupReport` only: whether this report alerted the parents (the first failure of a
    /// streak, or the first success after one).
    public var parentsAlerted: Bool?

    public init(lastRunAt: Int64? = nil, lastSucceeded: Bool? = nil, lastSuccessAt: Int64? = nil, archive: String? = nil, bytes: Int64? = nil,
                copiedTo: String? = nil, failingSince: Int64? = nil, problem: String? = nil, parentsAlerted: Bool? = nil) {
        self.lastRunAt = lastRunAt
        self.lastSucceeded = lastSucceeded
        self.lastSuccessAt = lastSuccessAt
        self.archive = archive
        self.bytes = bytes
        self.copiedTo = copiedTo
        self.failingSince = failingSince
        self.problem = problem
        self.parentsAlerted = parentsAlerted
    }
}

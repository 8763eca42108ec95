import Foundation
import Glibc
import ServerVersion

/// Puts the server an archive holds in place of the one here, in steps that survive being
/// killed at any point (kill -9, a power cut):
///
/// 1. **Stage**: the archive is unpacked and checked into `<state>/restore-in-progress/staged`,
///    its databases' numbering moved ahead (``RestoredSequences``), its files given to the
///    services' owner; then `plan.json` is written beside it. Killed before the plan exists,
///    the next run starts again from the archive.
/// 2. **Swap**, the services stopped: each file the archive puts back is one rename; what it
///    replaces (a database with its `-wal` and `-shm`, the gateway's key, a configuration
///    file) is moved into `<state>/before-restore-<time>/` first, and kept. Each move looks at
///    what is where, so running it again goes on where it stopped.
/// 3. **Start** and check, then the work directory goes.
///
/// Until step 3 ends, running the restore again finishes it, and ``undo(_:)`` puts the data
/// that was moved aside back instead. Everything stays inside the state directory (but the
/// configuration files), so each move is a rename on one file system.
struct ServerRestore {
    struct Plan: Codable {
        var archive: String
        var startedAt: Date
        var manifest: ServerArchive.Manifest
        /// Where the files the restore replaces are kept.
        var aside: String
        /// Whether the scheduled backups' timer ran before (it is stopped meanwhile).
        var timerWasActive: Bool
        /// Every file is in place.
        var swapped = false
    }

    /// One file the restore puts back (`staged` → `live`), or only takes away (`staged` nil).
    struct Move {
        var staged: String?
        var live: String
        var aside: String
        /// Files that belong to `live` and go aside with it: a database's `-wal`, `-shm`.
        var companions: [String]
    }

    enum Failure: Error, CustomStringConvertible {
        case refused(String)
        case io(String)
        var description: String { switch self { case .refused(let what), .io(let what): what } }
    }

    let state: String
    let config: String

    var work: String { self.state + "/restore-in-progress" }
    var planPath: String { self.work + "/plan.json" }
    var staged: String { self.work + "/staged" }

    /// The restore begun and not finished here, if any.
    func pendingPlan() throws -> Plan? {
        guard let data = FileManager.default.contents(atPath: self.planPath) else { return nil }
        do {
            return try Self.decoder.decode(Plan.self, from: data)
        } catch {
            throw Failure.io("\(self.planPath) cannot be read (\(error)): move \(self.work) away to begin again")
        }
    }

    // MARK: Stage

    func stage(archive: String, passphrase: Data?, timerWasActive: Bool) throws -> Plan {
        // What a run killed before its plan was written left: begun again from the archive.
        try? FileManager.default.removeItem(atPath: self.work)
        do {
            return try self.unpack(archive: archive, passphrase: passphrase, timerWasActive: timerWasActive)
        } catch {
            // Refused or damaged: nothing is left behind, and nothing was changed.
            try? FileManager.default.removeItem(atPath: self.work)
            throw error
        }
    }

    private func unpack(archive: String, passphrase: Data?, timerWasActive: Bool) throws -> Plan {
        try FileManager.default.createDirectory(atPath: self.work, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let manifest = try ServerArchive.extract(archive, into: self.staged, passphrase: passphrase, scratch: self.work)
        try Self.checkVersion(of: manifest, archive: archive)
        for database in manifest.databases {
            let path = self.staged + "/" + database.path
            do {
                switch (database.path as NSString).lastPathComponent {
                case "store.sqlite": _ = try RestoredSequences.advanceStore(at: path)
                case "push.sqlite": try RestoredSequences.advancePush(at: path)
                default: break
                }
            } catch {
                throw ServerArchive.Failure.mismatch("\(archive) is damaged: \(database.path) is not a database this server knows (\(error))")
            }
        }
        // The services' files belong to their user (the state directory's owner), whoever made
        // the archive; the configuration's to the configuration directory's.
        let services = try Self.owner(of: self.state), configuration = (try? Self.owner(of: self.config)) ?? (uid: 0, gid: 0)
        for entry in manifest.databases + manifest.files {
            let owner = entry.path.hasPrefix("etc/") ? configuration : services
            guard chown(self.staged + "/" + entry.path, owner.uid, owner.gid) == 0 || errno == EPERM && getuid() != 0 else {
                throw Failure.io("cannot give \(entry.path) to its owner: \(String(cString: strerror(errno)))")
            }
        }
        let stamp = Date().formatted(.iso8601.year().month().day().dateSeparator(.omitted).time(includingFractionalSeconds: false).timeSeparator(.omitted))
        let plan = Plan(archive: archive, startedAt: Date(), manifest: manifest, aside: self.state + "/before-restore-\(stamp)", timerWasActive: timerWasActive)
        sync()
        try self.save(plan)
        return plan
    }

    /// Refuses an archive a newer server made: its databases may hold what this one cannot read.
    static func checkVersion(of manifest: ServerArchive.Manifest, archive: String) throws {
        guard manifest.format <= ServerArchive.Manifest.currentFormat, !Self.isNewer(manifest.serverVersion, than: ServerVersion.current) else {
            throw Failure.refused("\(archive) was made by version \(manifest.serverVersion), newer than this server's \(ServerVersion.current): "
                                  + "install version \(manifest.serverVersion) or later, then restore it")
        }
    }

    /// Dotted versions compared number by number ("0.10.0" is newer than "0.9.2").
    static func isNewer(_ version: String, than other: String) -> Bool {
        func numbers(_ text: String) -> [Int] {
            text.split(whereSeparator: { $0 == "+" || $0 == "~" || $0 == "-" }).first.map { $0.split(separator: ".").map { Int($0) ?? 0 } } ?? []
        }
        let (left, right) = (numbers(version), numbers(other))
        for index in 0..<max(left.count, right.count) {
            let (a, b) = (index < left.count ? left[index] : 0, index < right.count ? right[index] : 0)
            if a != b { return a > b }
        }
        return false
    }

    // MARK: Swap

    func moves(_ plan: Plan) -> [Move] {
        var moves: [Move] = []
        for database in plan.manifest.databases {
            let name = (database.path as NSString).lastPathComponent
            moves.append(Move(staged: self.staged + "/" + database.path, live: self.state + "/" + name, aside: plan.aside + "/" + name,
                              companions: ["-wal", "-shm", "-journal"]))
        }
        for file in plan.manifest.files {
            if file.path.hasPrefix("etc/") {
                let name = String(file.path.dropFirst("etc/".count))
                moves.append(Move(staged: self.staged + "/" + file.path, live: self.config + "/" + name, aside: plan.aside + "/" + file.path, companions: []))
            } else {
                moves.append(Move(staged: self.staged + "/" + file.path, live: self.state + "/" + file.path, aside: plan.aside + "/" + file.path, companions: []))
            }
        }
        // The gateway's endpoint (its pin) describes the key being replaced: it goes, and the
        // gateway writes it again when it starts.
        moves.append(Move(staged: nil, live: self.state + "/gateway/endpoint.json", aside: plan.aside + "/gateway/endpoint.json", companions: []))
        return moves
    }

    /// Every file in place; what each replaces kept aside. Goes on where a killed run stopped.
    func swap(_ plan: inout Plan, afterEachMove: (Int) -> Void = { _ in }) throws {
        guard !plan.swapped else { return }
        for (number, move) in self.moves(plan).enumerated() {
            defer { afterEachMove(number + 1) }
            guard move.staged.map({ FileManager.default.fileExists(atPath: $0) }) ?? true else { continue }
            for suffix in [""] + move.companions where Self.exists(move.live + suffix) {
                try Self.makeDirectory(for: move.aside)
                // Already aside (a killed run moved it): what is here now came after, and is kept too.
                let aside = Self.exists(move.aside + suffix) ? move.aside + suffix + ".later" : move.aside + suffix
                try Self.move(move.live + suffix, to: aside)
            }
            if let staged = move.staged {
                try Self.makeDirectory(for: move.live, owner: try Self.owner(of: self.state))
                try Self.move(staged, to: move.live)
            }
        }
        sync()
        plan.swapped = true
        try self.save(plan)
    }

    /// Puts back what was moved aside, and takes away what the restore put in its place.
    func undo(_ plan: Plan) throws {
        for move in self.moves(plan).reversed() {
            // The archive's file went in here: it goes, with whatever SQLite made beside it.
            let restoredHere = move.staged.map { !Self.exists($0) } ?? false
            for suffix in [""] + move.companions {
                if Self.exists(move.aside + suffix) {
                    if Self.exists(move.live + suffix) { try FileManager.default.removeItem(atPath: move.live + suffix) }
                    try Self.move(move.aside + suffix, to: move.live + suffix)
                } else if restoredHere, Self.exists(move.live + suffix) {
                    try FileManager.default.removeItem(atPath: move.live + suffix)
                }
            }
        }
        // The directories the moves aside made, now empty (a file that came later stays).
        for directory in [plan.aside + "/gateway", plan.aside + "/etc", plan.aside] { rmdir(directory) }
        sync()
    }

    func finish() {
        try? FileManager.default.removeItem(atPath: self.work)
        sync()
    }

    // MARK: Files

    private func save(_ plan: Plan) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        let partial = self.planPath + ".partial"
        try encoder.encode(plan).write(to: URL(fileURLWithPath: partial))
        try Self.move(partial, to: self.planPath)
        sync()
    }

    private static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }

    private static func exists(_ path: String) -> Bool {
        var status = stat()
        return lstat(path, &status) == 0
    }

    static func owner(of path: String) throws -> (uid: uid_t, gid: gid_t) {
        var status = stat()
        guard stat(path, &status) == 0 else { throw Failure.io("\(path): \(String(cString: strerror(errno)))") }
        return (status.st_uid, status.st_gid)
    }

    private static func makeDirectory(for file: String, owner: (uid: uid_t, gid: gid_t)? = nil) throws {
        let directory = (file as NSString).deletingLastPathComponent
        guard !FileManager.default.fileExists(atPath: directory) else { return }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        if let owner { _ = chown(directory, owner.uid, owner.gid) }
    }

    /// A rename; across file systems (the configuration directory), a copy renamed into
    /// place, then the original removed.
    private static func move(_ from: String, to: String) throws {
        if rename(from, to) == 0 { return }
        guard errno == EXDEV else { throw Failure.io("cannot move \(from) to \(to): \(String(cString: strerror(errno)))") }
        let partial = to + ".restoring"
        try? FileManager.default.removeItem(atPath: partial)
        do {
            try FileManager.default.copyItem(atPath: from, toPath: partial)
            var status = stat()
            if stat(from, &status) == 0 { _ = chown(partial, status.st_uid, status.st_gid); _ = chmod(partial, status.st_mode & 0o7777) }
            sync()
            guard rename(partial, to) == 0 else { throw Failure.io("cannot move \(from) to \(to): \(String(cString: strerror(errno)))") }
            try FileManager.default.removeItem(atPath: from)
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure.io("cannot move \(from) to \(to): \(error.localizedDescription)")
        }
    }
}

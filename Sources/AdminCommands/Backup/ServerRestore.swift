import Foundation
import Glibc
import ServerVersion

/// Puts the server an archive holds in place of the one here, in steps that survive being
/// killed at any point (kill -9, a power cut):
///
/// 1. **Stage**: the archive is unpacked and checked into `<state>/restore-in-progress/staged`,
///    its databases' numbering moved ahead (``RestoredSequences``), its files given to their
///    owners and modes; then `plan.json` is written beside it, with each staged file's inode.
///    Killed before the plan exists, the next run starts again from the archive.
/// 2. **Swap**, the services held (``holdPath``: every unit's `ConditionPathExists=!`, so
///    that not even a reboot starts them meanwhile) and stopped: each file the archive puts
///    back is one rename; what it replaces (a database with its `-wal` and `-shm`, the
///    gateway's key, a configuration file) is moved into `<state>/before-restore-<time>/`
///    first, and kept. Each move looks at what is where, so running it again goes on where
///    it stopped.
/// 3. **Start** and check, then the work directory goes.
///
/// Until the services start on the restored files, ``undo(_:)`` puts the data moved aside
/// back instead: a file is taken away only when its inode is the staged one's, so an undo
/// run twice never removes what it put back.
struct ServerRestore {
    enum Phase: String, Codable {
        /// Unpacked and checked; nothing here changed yet.
        case staged
        /// Every file in place.
        case swapped
        /// The services were started on the restored files: devices may hold their numbers.
        case started
        /// Putting the data moved aside back.
        case abandoning
    }

    struct Plan: Codable {
        var archive: String
        var startedAt: Date
        var manifest: ServerArchive.Manifest
        /// Where the files the restore replaces are kept.
        var aside: String
        /// Whether the scheduled backups' timer ran before (it is stopped meanwhile).
        var timerWasActive: Bool
        /// Each restored file's inode, by the path it goes to.
        var stagedInodes: [String: UInt64]
        var phase: Phase
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

    /// The only files an archive may put back.
    static let databases: Set<String> = ["databases/store.sqlite", "databases/push.sqlite", "databases/aggregator.sqlite"]
    static let gatewayFiles: Set<String> = ["gateway/key.pem", "gateway/certificate.pem"]

    let state: String
    let config: String

    var work: String { self.state + "/restore-in-progress" }
    var planPath: String { self.work + "/plan.json" }
    var staged: String { self.work + "/staged" }
    /// While it exists no unit of the server starts (systemd/*.service, *.socket).
    var holdPath: String { self.work + "/hold" }

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
        for entry in manifest.databases + manifest.files where !Self.isRestorable(entry.path, database: manifest.databases.contains(entry)) {
            throw ServerArchive.Failure.mismatch("\(archive) is damaged: it names \(entry.path), which no ScreenTime Rewards backup holds")
        }
        for database in manifest.databases {
            let path = self.staged + "/" + database.path
            do {
                switch database.path {
                case "databases/store.sqlite": _ = try RestoredSequences.advanceStore(at: path)
                case "databases/push.sqlite": try RestoredSequences.advancePush(at: path)
                default: break
                }
            } catch {
                throw ServerArchive.Failure.mismatch("\(archive) is damaged: \(database.path) is not a database this server knows (\(error))")
            }
        }
        // The services' files belong to their user (the state directory's owner) and only to
        // it, whoever made the archive; the configuration to the configuration directory's.
        let services = try Self.owner(of: self.state), configuration = (try? Self.owner(of: self.config)) ?? (uid: 0, gid: 0)
        for entry in manifest.databases + manifest.files {
            let isConfiguration = entry.path.hasPrefix("etc/")
            // A configuration file keeps a stricter mode it was archived with (a secret kept there).
            try Self.own(self.staged + "/" + entry.path, isConfiguration ? configuration : services, mode: isConfiguration ? 0o644 : 0o600,
                         keepingStricter: isConfiguration)
        }
        let stamp = Date().formatted(.iso8601.year().month().day().dateSeparator(.omitted).time(includingFractionalSeconds: false).timeSeparator(.omitted))
        var plan = Plan(archive: archive, startedAt: Date(), manifest: manifest, aside: self.state + "/before-restore-\(stamp)",
                        timerWasActive: timerWasActive, stagedInodes: [:], phase: .staged)
        for move in self.moves(plan) {
            if let staged = move.staged, let inode = Self.inode(staged) { plan.stagedInodes[move.live] = inode }
        }
        sync()
        try self.save(plan)
        return plan
    }

    /// A database this server has, the gateway's key or certificate, or one configuration file.
    static func isRestorable(_ path: String, database: Bool) -> Bool {
        if database { return Self.databases.contains(path) }
        if Self.gatewayFiles.contains(path) { return true }
        let name = path.dropFirst("etc/".count)
        return path.hasPrefix("etc/") && !name.isEmpty && !name.contains("/") && !name.hasPrefix(".")
            && !name.unicodeScalars.contains { $0.properties.generalCategory == .control }
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

    /// Holds every unit of the server stopped (across a reboot too) until ``release()``.
    func hold() throws {
        guard FileManager.default.createFile(atPath: self.holdPath, contents: Data()) else {
            throw Failure.io("cannot create \(self.holdPath): \(String(cString: strerror(errno)))")
        }
        sync()
    }

    func release() {
        unlink(self.holdPath)
        sync()
    }

    /// Every file in place; what each replaces kept aside. Goes on where a killed run stopped.
    func swap(_ plan: inout Plan, afterEachMove: (Int) -> Void = { _ in }) throws {
        guard plan.phase == .staged else { return }
        for (number, move) in self.moves(plan).enumerated() {
            defer { afterEachMove(number + 1) }
            guard let staged = move.staged else {
                if Self.exists(move.live) { try Self.moveAside(move.live, to: move.aside) }
                continue
            }
            guard Self.exists(staged) else { continue }  // in place already
            if !Self.exists(move.aside) {
                // What is here is the original: its companions first, so that "the file is
                // aside" means its whole group is.
                for suffix in move.companions where Self.exists(move.live + suffix) { try Self.moveAside(move.live + suffix, to: move.aside + suffix) }
                if Self.exists(move.live) { try Self.moveAside(move.live, to: move.aside) }
            } else {
                // The original is aside already: what is here came after, and is kept apart.
                for suffix in [""] + move.companions where Self.exists(move.live + suffix) {
                    try Self.moveAside(move.live + suffix, to: Self.later(move.aside + suffix))
                }
            }
            try Self.makeDirectory(for: move.live, owner: try Self.owner(of: self.state))
            try Self.move(staged, to: move.live)
        }
        sync()
        plan.phase = .swapped
        try self.save(plan)
    }

    /// Puts back what was moved aside, and takes away what the restore put in its place.
    func undo(_ plan: Plan, afterEachMove: (Int) -> Void = { _ in }) throws {
        for (number, move) in self.moves(plan).reversed().enumerated() {
            defer { afterEachMove(number + 1) }
            let group = [""] + move.companions
            if Self.exists(move.aside) {
                // The original is aside: what is here now (the restore's, or later) goes.
                for suffix in group where Self.exists(move.live + suffix) { try FileManager.default.removeItem(atPath: move.live + suffix) }
                try Self.move(move.aside, to: move.live)
            } else if let restored = plan.stagedInodes[move.live], Self.inode(move.live) == restored {
                // Nothing was here before: the restore's file goes, with what SQLite made beside it.
                for suffix in group where Self.exists(move.live + suffix) { try FileManager.default.removeItem(atPath: move.live + suffix) }
            }
            // The original's companions, back beside it.
            for suffix in move.companions where Self.exists(move.aside + suffix) {
                if Self.exists(move.live + suffix) { try FileManager.default.removeItem(atPath: move.live + suffix) }
                try Self.move(move.aside + suffix, to: move.live + suffix)
            }
        }
        // The directories the moves aside made, now empty (a file that came later stays).
        for directory in [plan.aside + "/gateway", plan.aside + "/etc", plan.aside] { rmdir(directory) }
        sync()
    }

    func save(_ plan: Plan) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        let partial = self.planPath + ".partial"
        try encoder.encode(plan).write(to: URL(fileURLWithPath: partial))
        try Self.move(partial, to: self.planPath)
        sync()
    }

    /// The plan first: killed midway, no run takes what is left for a restore under way.
    func finish() {
        unlink(self.planPath)
        sync()
        try? FileManager.default.removeItem(atPath: self.work)
        sync()
    }

    // MARK: Files

    private static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }

    private static func exists(_ path: String) -> Bool {
        var status = stat()
        return lstat(path, &status) == 0
    }

    private static func inode(_ path: String) -> UInt64? {
        var status = stat()
        return lstat(path, &status) == 0 ? UInt64(status.st_ino) : nil
    }

    /// `path.later-1`, `path.later-2`, …: the first free one.
    private static func later(_ path: String) -> String {
        var number = 1
        while Self.exists("\(path).later-\(number)") { number += 1 }
        return "\(path).later-\(number)"
    }

    static func owner(of path: String) throws -> (uid: uid_t, gid: gid_t) {
        var status = stat()
        guard stat(path, &status) == 0 else { throw Failure.io("\(path): \(String(cString: strerror(errno)))") }
        return (status.st_uid, status.st_gid)
    }

    /// Its owner and mode, set through a descriptor opened without following a link.
    /// `keepingStricter`: at most `mode`, never more than the file has (as unpacked: its
    /// archived mode less the umask).
    private static func own(_ path: String, _ owner: (uid: uid_t, gid: gid_t), mode: mode_t, keepingStricter: Bool = false) throws {
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { throw Failure.io("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var mode = mode
        var status = stat()
        if keepingStricter, fstat(descriptor, &status) == 0 { mode &= status.st_mode & 0o777 }
        guard fchown(descriptor, owner.uid, owner.gid) == 0 || getuid() != 0 else {
            throw Failure.io("cannot give \(path) to its owner: \(String(cString: strerror(errno)))")
        }
        guard fchmod(descriptor, mode) == 0 else { throw Failure.io("cannot set the mode of \(path): \(String(cString: strerror(errno)))") }
    }

    private static func makeDirectory(for file: String, owner: (uid: uid_t, gid: gid_t)? = nil) throws {
        let directory = (file as NSString).deletingLastPathComponent
        guard !FileManager.default.fileExists(atPath: directory) else { return }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        if let owner { _ = chown(directory, owner.uid, owner.gid) }
    }

    private static func moveAside(_ from: String, to: String) throws {
        try Self.makeDirectory(for: to)
        try Self.move(from, to: to)
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

import Foundation
import Glibc
import ProcessSpawn
import TestSupport

/// A PostgreSQL server of a test's own: a new cluster in a temporary directory, listening
/// on 127.0.0.1 at a free port, trusting local connections; run as the user nobody when
/// the tests run as root (PostgreSQL refuses root). It can be stopped and started again
/// on the same data.
final class TestPostgres: @unchecked Sendable {
    static let binDirectory: String = {
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []).compactMap(Int.init).sorted()
        return "/usr/lib/postgresql/\(versions.last ?? 15)/bin"
    }()

    let directory = TemporaryDirectory()
    let port: Int
    private var server: pid_t?
    private let prefix: [String]
    private var home: String { self.directory.file("pg") }

    /// The URL a relay is given (`--state-database`).
    var url: String { "postgres://relay@127.0.0.1:\(self.port)/relay?sslmode=disable" }

    /// Why it cannot run here, or nil.
    static var missing: String? {
        ["initdb", "postgres", "pg_isready", "createdb"].first { !FileManager.default.isExecutableFile(atPath: binDirectory + "/" + $0) }
            .map { "PostgreSQL's \($0) is not installed in \(binDirectory) (apt-get install postgresql; .ci/run does)" }
    }

    static func start() async throws -> TestPostgres {
        if let missing { throw TestFailure(missing) }
        let postgres = try TestPostgres(port: FreePort.pick())
        let command = postgres.prefix + [binDirectory + "/initdb", "-D", postgres.home + "/data", "-U", "relay", "--auth=trust", "--no-sync"]
        let initdb = try await runCommand(command[0], Array(command.dropFirst()), environment: ["LC_ALL": "C", "HOME": postgres.home], timeout: .seconds(120))
        guard initdb.status == 0 else { throw TestFailure("initdb failed: \(initdb.stderr)") }
        try await postgres.startServer()
        let created = try await postgres.tool("createdb", ["-h", "127.0.0.1", "-p", "\(postgres.port)", "-U", "relay", "relay"])
        guard created.status == 0 else { throw TestFailure("createdb failed: \(created.stderr)") }
        return postgres
    }

    private init(port: Int) throws {
        self.port = port
        try FileManager.default.createDirectory(atPath: self.directory.file("pg"), withIntermediateDirectories: true)
        if geteuid() == 0 {
            guard let nobody = getpwnam("nobody") else { throw TestFailure("running as root with no user nobody to run PostgreSQL as") }
            chmod(self.directory.path, 0o755)
            chown(self.directory.file("pg"), nobody.pointee.pw_uid, nobody.pointee.pw_gid)
            self.prefix = ["/usr/bin/setpriv", "--reuid=\(nobody.pointee.pw_uid)", "--regid=\(nobody.pointee.pw_gid)", "--clear-groups", "--"]
        } else {
            self.prefix = []
        }
    }

    /// Starts the server (again) and waits until it accepts connections.
    func startServer() async throws {
        let command = self.prefix + [Self.binDirectory + "/postgres", "-D", self.home + "/data", "-c", "listen_addresses=127.0.0.1",
                                     "-c", "port=\(self.port)", "-c", "unix_socket_directories=", "-c", "fsync=off",
                                     // Every statement in the log: a test counts what a client sent.
                                     "-c", "log_statement=all"]
        self.server = try Spawn(executable: command[0], arguments: Array(command.dropFirst()), environment: ["LC_ALL": "C"],
                                stdout: self.directory.file("server.log"), stderr: self.directory.file("server.log")).start()
        let pid = self.server
        _ = try await eventually("PostgreSQL accepting connections", timeout: .seconds(60)) { _ in
            if let pid, ChildExit.poll(pid) != nil {
                throw TestFailure("PostgreSQL exited: \((try? String(contentsOfFile: self.directory.file("server.log"), encoding: .utf8)) ?? "")")
            }
            return try await self.tool("pg_isready", ["-q", "-h", "127.0.0.1", "-p", "\(self.port)", "-U", "relay"]).status == 0 ? true : nil
        }
    }

    /// Stops the server (a fast shutdown, as `systemctl restart postgresql` does) and waits.
    func stopServer() async throws {
        guard let pid = self.server else { return }
        kill(pid, SIGINT)
        _ = try await ChildExit.wait(pid, timeout: .seconds(30))
        self.server = nil
    }

    /// How many statements clients sent with the extended protocol (one round trip each),
    /// from the server's log; a pool's keep-alive (`SELECT 1`) and a purge (`DELETE`) left out.
    func statementsSent() -> Int {
        let log = (try? String(contentsOfFile: self.directory.file("server.log"), encoding: .utf8)) ?? ""
        return log.split(separator: "\n").filter { line in
            line.contains("LOG:  execute ") && !line.contains("SELECT 1") && !line.contains("DELETE FROM")
        }.count
    }

    /// A query's single value (psql -tA).
    func query(_ sql: String) async throws -> String {
        let run = try await self.tool("psql", ["-X", "-tA", "-h", "127.0.0.1", "-p", "\(self.port)", "-U", "relay", "-d", "relay", "-c", sql])
        guard run.status == 0 else { throw TestFailure("psql -c \(sql): \(run.stderr)") }
        return run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func tool(_ name: String, _ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
        let path = FileManager.default.isExecutableFile(atPath: Self.binDirectory + "/" + name) ? Self.binDirectory + "/" + name : "/usr/bin/" + name
        return try await runCommand(path, arguments, environment: ["LC_ALL": "C"])
    }

    deinit {
        if let server { kill(server, SIGQUIT) }
    }
}

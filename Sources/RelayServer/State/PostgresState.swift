import Crypto
import Foundation
import Logging
import NIOCore
import PostgresNIO
import RelayCore
import Synchronization

/// The counts and the seen wakes of several copies of the relay, in one PostgreSQL
/// database: an atomic counter per key and fixed window (the sliding window reads the
/// previous one beside it), and a table of the digests of the wakes taken, both purged as
/// they expire. A push costs one statement, one round trip. When the database cannot be
/// reached in time, the relay refuses (503): it never lets a push through uncounted.
final class PostgresState: RelayState {
    let client: PostgresClient
    private let limits: CountLimits
    private let logger: Logger
    /// The one attempt at making the tables that callers wait for (nil: none yet, or the
    /// last failed and the next caller tries again).
    private let schema = Mutex<Task<Void, any Error>?>(nil)
    /// Whether the last statement failed: said once when it goes down, once when it is back.
    private let down = Mutex(false)
    /// How long a statement may take before the push is refused as unavailable.
    static let deadline: Duration = .seconds(2)
    /// How long a seen wake is kept: twice the age past which a wake is refused anyway.
    static let seenFor = 2 * WakeSignature.maximumAge

    init(url: String, limits: CountLimits, logger: Logger) throws(RelayConfigurationError) {
        self.client = PostgresClient(configuration: try Self.configuration(url), backgroundLogger: logger)
        self.limits = limits
        self.logger = logger
    }

    /// The client's connections and the purge of what expired; until cancelled.
    func run() async {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.client.run() }
            group.addTask {
                while (try? await Task.sleep(for: .seconds(60))) != nil {
                    await self.purge(now: Date())
                }
            }
        }
    }

    func admit(wake: SHA256.Digest?, counts: [Count], now: Date) async -> Admission {
        let digest = wake.map { Array($0) }
        do {
            let admission = try await Self.within(Self.deadline) {
                try await self.ensureSchema()
                return try await self.count(wake: digest, counts: counts, now: now)
            }
            if self.down.withLock({ down in defer { down = false }; return down }) {
                self.logger.notice("the shared state database answers again")
            }
            return admission
        } catch {
            if !self.down.withLock({ down in defer { down = true }; return down }) {
                self.logger.warning("the shared state database did not answer: refusing wakes and seals until it does",
                                    metadata: ["error": "\(String(reflecting: error))"])
            }
            return .unavailable(retryAfterSeconds: 5)
        }
    }

    private func count(wake: [UInt8]?, counts: [Count], now: Date) async throws -> Admission {
        let seconds = now.timeIntervalSince1970
        var keys: [String] = [], buckets: [Int64] = [], expiries: [Int64] = []
        for count in counts {
            let window = self.limits[count.kind].window
            let bucket = Int64((seconds / window).rounded(.down))
            keys.append(count.kind.rawValue + " " + count.key)
            buckets.append(bucket)
            expiries.append(Int64(Double(bucket + 2) * window))
        }
        let digest: ByteBuffer? = wake.map { ByteBuffer(bytes: $0) }
        let seenUntil = Int64(seconds + Self.seenFor)
        let rows = try await self.client.query("""
            WITH fresh AS (
              INSERT INTO screentime_relay_seen (digest, expires_at)
              SELECT \(digest)::bytea, \(seenUntil)::bigint WHERE \(digest)::bytea IS NOT NULL
              ON CONFLICT (digest) DO NOTHING RETURNING 1
            ), admitted AS (
              SELECT (\(digest)::bytea IS NULL OR EXISTS (SELECT 1 FROM fresh)) AS go
            ), input AS (
              SELECT * FROM unnest(\(keys)::text[], \(buckets)::bigint[], \(expiries)::bigint[]) WITH ORDINALITY AS t(key, bucket, expires_at, ord)
            ), bumped AS (
              INSERT INTO screentime_relay_counts (key, bucket, count, expires_at)
              SELECT key, bucket, 1, expires_at FROM input WHERE (SELECT go FROM admitted)
              ON CONFLICT (key, bucket) DO UPDATE SET count = screentime_relay_counts.count + 1
              RETURNING key, count
            )
            SELECT (SELECT go FROM admitted), coalesce(b.count, 0)::bigint, coalesce(p.count, 0)::bigint
            FROM input i
            LEFT JOIN bumped b ON b.key = i.key
            LEFT JOIN screentime_relay_counts p ON p.key = i.key AND p.bucket = i.bucket - 1
            ORDER BY i.ord
            """, logger: self.logger)
        var index = 0
        for try await (go, current, previous) in rows.decode((Bool, Int64, Int64).self) {
            guard go else { return .seenBefore }
            let kind = counts[index].kind
            let (limit, window) = self.limits[kind]
            let position = seconds / window
            let elapsed = position - position.rounded(.down)
            if Double(current) + Double(previous) * (1 - elapsed) > Double(limit) {
                let untilNext = max(1, Int(((position.rounded(.down) + 1) * window - seconds).rounded(.up)))
                return .limited(kind, retryAfterSeconds: untilNext)
            }
            index += 1
        }
        return .allowed
    }

    /// Makes the tables once, however many pushes arrive at once (one attempt, which they
    /// all wait for).
    private func ensureSchema() async throws {
        let attempt = self.schema.withLock { schema in
            if let schema { return schema }
            let attempt = Task { try await self.makeTables() }
            schema = attempt
            return attempt
        }
        do {
            try await attempt.value
        } catch {
            self.schema.withLock { if $0 == attempt { $0 = nil } }
            throw error
        }
    }

    /// The tables, made under an advisory lock (copies may start together).
    private func makeTables() async throws {
        try await self.client.withConnection { connection in
            try await connection.query("SELECT pg_advisory_lock(7262001)", logger: self.logger)
            do {
                try await connection.query("""
                    CREATE TABLE IF NOT EXISTS screentime_relay_counts (
                      key text NOT NULL, bucket bigint NOT NULL, count integer NOT NULL, expires_at bigint NOT NULL,
                      PRIMARY KEY (key, bucket))
                    """, logger: self.logger)
                try await connection.query("""
                    CREATE TABLE IF NOT EXISTS screentime_relay_seen (digest bytea PRIMARY KEY, expires_at bigint NOT NULL)
                    """, logger: self.logger)
                try await connection.query("CREATE INDEX IF NOT EXISTS screentime_relay_counts_expiry ON screentime_relay_counts (expires_at)", logger: self.logger)
                try await connection.query("CREATE INDEX IF NOT EXISTS screentime_relay_seen_expiry ON screentime_relay_seen (expires_at)", logger: self.logger)
            } catch {
                _ = try? await connection.query("SELECT pg_advisory_unlock(7262001)", logger: self.logger)
                throw error
            }
            try await connection.query("SELECT pg_advisory_unlock(7262001)", logger: self.logger)
        }
    }

    /// Drops the counts and seen wakes that expired.
    func purge(now: Date) async {
        let seconds = Int64(now.timeIntervalSince1970)
        do {
            try await self.ensureSchema()
            try await self.client.query("DELETE FROM screentime_relay_counts WHERE expires_at < \(seconds)", logger: self.logger)
            try await self.client.query("DELETE FROM screentime_relay_seen WHERE expires_at < \(seconds)", logger: self.logger)
        } catch {
            self.logger.warning("could not purge the shared state's expired rows", metadata: ["error": "\(String(reflecting: error))"])
        }
    }

    /// `body`'s result, or an error once `limit` has passed.
    private static func within<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: limit)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else { throw CancellationError() }
            return value
        }
    }

    /// A client configuration from `postgres://user[:password]@host[:port]/database`, with
    /// `?host=/run/postgresql` for a Unix socket's directory and `?sslmode=disable|prefer|require`.
    /// A password may come from `PGPASSWORD` instead of the URL (which `ps` shows).
    static func configuration(_ url: String) throws(RelayConfigurationError) -> PostgresClient.Configuration {
        guard let components = URLComponents(string: url), ["postgres", "postgresql"].contains(components.scheme ?? ""),
              let user = components.user, !user.isEmpty else {
            throw RelayConfigurationError("--state-database must be postgres://user[:password]@host[:port]/database (with ?host=/socket/directory for a Unix socket)")
        }
        let query = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }) { _, last in last }
        let database = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        let password = components.password ?? ProcessInfo.processInfo.environment["PGPASSWORD"]
        let port = components.port ?? 5432
        var configuration: PostgresClient.Configuration
        if let directory = query["host"], directory.hasPrefix("/") {
            configuration = .init(unixSocketPath: directory + "/.s.PGSQL.\(port)", username: user, password: password, database: database.isEmpty ? user : database)
        } else {
            guard let host = components.host, !host.isEmpty else {
                throw RelayConfigurationError("--state-database names no host: postgres://user@host/database, or ?host=/socket/directory")
            }
            let tls: PostgresClient.Configuration.TLS
            switch query["sslmode"] ?? "prefer" {
            case "disable": tls = .disable
            case "prefer": tls = .prefer(.makeClientConfiguration())
            case "require": tls = .require(.makeClientConfiguration())
            case let other: throw RelayConfigurationError("--state-database's sslmode=\(other) is not one of disable, prefer, require")
            }
            configuration = .init(host: host, port: port, username: user, password: password, database: database.isEmpty ? user : database, tls: tls)
        }
        configuration.options.connectTimeout = .seconds(2)
        // Counts and seen wakes need not wait for the disk: a database crash loses at most
        // the last fraction of a second of them, and every push waits a flush less.
        configuration.options.additionalStartupParameters = [("application_name", "screentime-relayd"), ("synchronous_commit", "off")]
        return configuration
    }
}

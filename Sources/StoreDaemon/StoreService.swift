import ArgumentParser
import OptionChecks
import RecordStore
import ServerVersion
import ServiceKit

public struct StoreService: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "screentime-stored",
        abstract: "The ScreenTime Rewards record store: families, zones, records, shares and change feeds on SQLite.",
        discussion: """
            Serves the store.* methods on <runtime-dir>/store.sock (or the socket systemd passes). \
            The database is <state-dir>/store.sqlite (WAL mode, synchronous=FULL): a save that got \
            a reply survives kill -9 and power loss. The methods: /usr/share/doc/screentime-server/protocol.md; \
            backups: /usr/share/doc/screentime-server/operations.md (docs/ in the source).
            """,
        version: ServerVersion.current
    )

    public init() {}

    @OptionGroup var options: ServiceOptions

    @Option(name: .customLong("tombstone-grace"), help: ArgumentHelp("How long deletions stay visible to change feeds before they are purged, in days.", valueName: "days"))
    var tombstoneGraceDays: Double = 30

    @Option(name: .customLong("purge-interval"), help: ArgumentHelp("How often purging runs, in seconds.", valueName: "seconds"))
    var purgeIntervalSeconds: Double = 3600

    @Option(name: .customLong("wake"), help: ArgumentHelp(
        "A service to wake on commits while it is not following store.watch, as NAME=SOCKET (repeatable; none to wake nobody).",
        discussion: "Default: push=<runtime-dir>/push.sock and aggregator=<runtime-dir>/aggregator.sock; a socket that does not exist is skipped.",
        valueName: "name=socket"))
    var wake: [String] = []

    @Option(name: .customLong("schema-version"), help: .hidden)
    var schemaVersion: Int?

    public mutating func validate() throws {
        try checkOption("--tombstone-grace", self.tombstoneGraceDays, in: 0...RecordStore.maximumGraceSeconds / 86_400, "days")
        guard self.purgeIntervalSeconds > 0, self.purgeIntervalSeconds <= RecordStore.maximumGraceSeconds else {
            throw ValidationError("--purge-interval must be a positive number of seconds, at most \(Int(RecordStore.maximumGraceSeconds))")
        }
        for argument in self.wake where argument != "none" && WakeTarget(argument: argument) == nil {
            throw ValidationError("--wake takes NAME=/absolute/socket/path or none, not \(argument)")
        }
    }

    public func run() async throws {
        let configuration = StoreConfiguration(
            tombstoneGrace: .milliseconds(Int64(self.tombstoneGraceDays * 86_400_000)),
            purgeInterval: .seconds(self.purgeIntervalSeconds),
            wake: self.wake.isEmpty ? nil : self.wake.compactMap(WakeTarget.init(argument:)),
            schemaVersion: self.schemaVersion)
        try await ServiceMain.run(service: "store", identifier: "screentime-stored", version: ServerVersion.current, options: self.options) { environment in
            try await .store(configuration, environment: environment)
        }
    }
}

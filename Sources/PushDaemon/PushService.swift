import ArgumentParser
import OptionChecks
import Foundation
import PushEngine
import ServerVersion
import ServiceKit

public struct PushService: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "screentime-pushd",
        abstract: "The ScreenTime Rewards push service: subscriptions to record changes, live notification streams, durable per-device queues.",
        discussion: """
            Serves the push.* methods on <runtime-dir>/push.sock (or the socket systemd passes). \
            Follows the record store's change log (<runtime-dir>/store.sock) from where it stopped; \
            subscriptions, queues and that position are in <state-dir>/push.sqlite. The methods: /usr/share/doc/screentime-server/protocol.md (docs/ in the source).
            """,
        version: ServerVersion.current
    )

    public init() {}

    @OptionGroup var options: ServiceOptions

    @Option(name: .customLong("store-socket"), help: ArgumentHelp("The record store's socket.", discussion: "Default: <runtime-dir>/store.sock.", valueName: "path"))
    var storeSocket: String?

    @Option(name: .customLong("listener-buffer"), help: ArgumentHelp("Notifications a listener may fall behind before it is cut off (it then resumes from its queue).", valueName: "count"))
    var listenerBuffer: Int = 1024

    @Option(name: .customLong("listener-buffer-bytes"), help: ArgumentHelp("Bytes of notifications a listener may fall behind before it is cut off (what one stalled stream may cost).", valueName: "bytes"))
    var listenerBufferBytes: Int = 512 * 1024

    @Option(name: .customLong("connection-buffer-bytes"), help: ArgumentHelp("Bytes of notifications the listeners of one connection may fall behind together before they are cut off (what one stalled connection may cost, however many streams it carries).", valueName: "bytes"))
    var connectionBufferBytes: Int = 4 << 20

    @Option(name: .customLong("max-listeners-per-device"), help: ArgumentHelp("push.listen streams one device may hold at once; more are refused with limit_exceeded.", valueName: "count"))
    var maximumListenersPerDevice: Int = 4

    @Option(name: .customLong("max-listeners-per-connection"), help: ArgumentHelp("push.listen streams one connection may carry at once; more are refused with limit_exceeded.", valueName: "count"))
    var maximumListenersPerConnection: Int = 64

    @Option(name: .customLong("max-subscriptions"), help: ArgumentHelp("Subscriptions per device.", valueName: "count"))
    var maximumSubscriptions: Int = 100

    @Option(name: .customLong("default-ttl"), help: ArgumentHelp("Seconds an undelivered notification stays queued, unless it says otherwise.", valueName: "seconds"))
    var defaultTTLSeconds: Double = 7 * 86_400

    @Option(name: .customLong("access-refresh"), help: ArgumentHelp("While the store's credentials cannot be followed (the store is away), seconds a family's credentials and shares are trusted before they are read again.", valueName: "seconds"))
    var accessRefreshSeconds: Double = 30

    @Option(name: .customLong("maintenance-interval"), help: ArgumentHelp("Seconds between drops of expired notifications and checks of listeners' credentials.", valueName: "seconds"))
    var maintenanceSeconds: Double = 60

    @Option(name: .customLong("collapse-window"), help: ArgumentHelp("Milliseconds a change's \"fetch changes\" hint (a zone or family subscription's notification) is held: a burst of changes within it reaches each device as one notification, the last. 0: none held.", valueName: "ms"))
    var collapseWindowMilliseconds: Int = 250

    @Flag(help: ArgumentHelp("Post notifications to devices' HTTP endpoints (UnifiedPush, ntfy) when they are not listening.", discussion: "Off by default: the service then needs no network. Devices set their endpoint with push.setWebhook."))
    var webhooks = false

    @Option(name: .customLong("webhook-timeout"), help: ArgumentHelp("Seconds an endpoint has to answer a post.", valueName: "seconds"))
    var webhookTimeoutSeconds: Double = 10

    @Option(name: .customLong("webhook-attempts"), help: ArgumentHelp("Posts of one notification before it is left to the device's next listen.", valueName: "count"))
    var webhookAttempts: Int = 8

    @Option(name: .customLong("webhook-retry"), help: ArgumentHelp("Seconds before the first retry; each next one waits twice as long, up to 15 minutes.", valueName: "seconds"))
    var webhookRetrySeconds: Double = 5

    @Option(name: .customLong("wake-relay"), help: ArgumentHelp("Wake sleeping iPhones through this wake relay (the app publisher's screentime-relayd, https://…).", discussion: "Off by default. Devices register with push.registerWake; a device not listening (or not acknowledging within --wake-after) is woken with a content-free push. Needs outbound HTTPS (the webhooks drop-in).", valueName: "url"))
    var wakeRelay: String?

    @Option(name: .customLong("wake-relay-ca"), help: ArgumentHelp("A CA certificate (PEM) to trust for the wake relay instead of the system's.", valueName: "path"))
    var wakeRelayCA: String?

    @Option(name: .customLong("wake-key"), help: ArgumentHelp("The gateway's private key (PEM, P-256): wakes are signed with it, and the relay checks it against the pin the device paired with.", discussion: "Default: <state-dir>/gateway/key.pem, the key the gateway makes.", valueName: "path"))
    var wakeKey: String?

    @Option(name: .customLong("wake-after"), help: ArgumentHelp("Seconds a listening device has to acknowledge a notification before it is woken anyway (an app suspended with its connection open).", valueName: "seconds"))
    var wakeAfterSeconds: Double = 5

    @Option(name: .customLong("wakes-per-hour"), help: ArgumentHelp("Background wakes per device in any hour (Apple's guidance: two or three); alerts are not counted.", valueName: "count"))
    var wakesPerHour: Int = 3

    @Option(name: .customLong("apns-key-file"), help: ArgumentHelp("Direct mode, instead of --wake-relay: the family's own APNs key (.p8), for an app it builds with its own developer account; push then sends wakes to APNs itself.", valueName: "path"))
    var apnsKeyFile: String?

    @Option(name: .customLong("apns-key-id"), help: ArgumentHelp("Direct mode: the APNs key's id (10 characters).", valueName: "id"))
    var apnsKeyId: String?

    @Option(name: .customLong("apns-team-id"), help: ArgumentHelp("Direct mode: the developer team id (10 characters).", valueName: "id"))
    var apnsTeamId: String?

    @Option(name: .customLong("apns-topic"), help: ArgumentHelp("Direct mode: the app's bundle id (repeat for several).", valueName: "bundle-id"))
    var apnsTopics: [String] = []

    @Option(name: .customLong("apns-url"), help: ArgumentHelp(visibility: .hidden))
    var apnsURL: String?

    @Option(name: .customLong("apns-ca-file"), help: ArgumentHelp(visibility: .hidden))
    var apnsCAFile: String?

    public mutating func validate() throws {
        try checkOption("--listener-buffer", self.listenerBuffer, in: 16...1_000_000)
        try checkOption("--listener-buffer-bytes", self.listenerBufferBytes, in: 16 * 1024...1 << 30)
        try checkOption("--connection-buffer-bytes", self.connectionBufferBytes, in: 16 * 1024...1 << 30)
        try checkOption("--max-listeners-per-device", self.maximumListenersPerDevice, in: 1...1000)
        try checkOption("--max-listeners-per-connection", self.maximumListenersPerConnection, in: 1...100_000)
        try checkOption("--max-subscriptions", self.maximumSubscriptions, in: 1...10_000)
        guard (1...30 * 86_400).contains(self.defaultTTLSeconds) else { throw ValidationError("--default-ttl must be between 1 second and 30 days") }
        try checkOption("--access-refresh", self.accessRefreshSeconds, in: 0.1...3600, "seconds")
        try checkOption("--maintenance-interval", self.maintenanceSeconds, in: 0.1...86_400, "seconds")
        try checkOption("--collapse-window", self.collapseWindowMilliseconds, in: 0...10_000, "ms")
        try checkOption("--webhook-timeout", self.webhookTimeoutSeconds, in: 0.5...120, "seconds")
        try checkOption("--webhook-attempts", self.webhookAttempts, in: 1...100)
        try checkOption("--webhook-retry", self.webhookRetrySeconds, in: 0.01...3600, "seconds")
        if let relay = self.wakeRelay {
            guard let url = URLComponents(string: relay), ["https", "http"].contains(url.scheme?.lowercased() ?? ""), url.host?.isEmpty == false,
                  url.user == nil, url.password == nil, url.query == nil
            else { throw ValidationError("--wake-relay must be the relay's base URL, such as https://relay.example.org") }
        }
        if self.apnsKeyFile != nil {
            guard self.wakeRelay == nil else { throw ValidationError("give --wake-relay or --apns-key-file, not both: wakes go through the publisher's relay or straight to APNs") }
            guard self.apnsKeyId?.count == 10, self.apnsTeamId?.count == 10 else {
                throw ValidationError("direct mode needs --apns-key-id and --apns-team-id (10 characters each) with --apns-key-file")
            }
            guard !self.apnsTopics.isEmpty else { throw ValidationError("direct mode needs --apns-topic, the app's bundle id") }
        } else if self.apnsKeyId != nil || self.apnsTeamId != nil || !self.apnsTopics.isEmpty {
            throw ValidationError("--apns-key-id, --apns-team-id and --apns-topic go with --apns-key-file")
        }
        try checkOption("--wake-after", self.wakeAfterSeconds, in: 0.1...600, "seconds")
        try checkOption("--wakes-per-hour", self.wakesPerHour, in: 1...60)
    }

    /// Where wakes go, if anywhere.
    func wakeRoute() throws -> PushConfiguration.WakeDelivery.Route? {
        if let relay = self.wakeRelay {
            return .relay(url: relay.hasSuffix("/") ? String(relay.dropLast()) : relay, caFile: self.wakeRelayCA,
                          signingKeyFile: self.wakeKey ?? ServicePaths(options: self.options).stateDirectory + "/gateway/key.pem")
        }
        guard let keyFile = self.apnsKeyFile, let keyId = self.apnsKeyId, let teamId = self.apnsTeamId else { return nil }
        let p8: String
        do {
            p8 = try String(contentsOfFile: keyFile, encoding: .utf8)
        } catch {
            throw ValidationError("cannot read --apns-key-file \(keyFile): \(error.localizedDescription)")
        }
        return .direct(.init(keyId: keyId, teamId: teamId, p8: p8, topics: Set(self.apnsTopics), apnsURL: self.apnsURL, apnsCAFile: self.apnsCAFile))
    }

    public func run() async throws {
        let configuration = PushConfiguration(
            storeSocket: self.storeSocket ?? ServicePaths(options: self.options).runtimeDirectory + "/store.sock",
            listenerBuffer: self.listenerBuffer,
            listenerBufferBytes: self.listenerBufferBytes,
            connectionBufferBytes: self.connectionBufferBytes,
            maximumListenersPerDevice: self.maximumListenersPerDevice,
            maximumListenersPerConnection: self.maximumListenersPerConnection,
            maximumSubscriptions: self.maximumSubscriptions,
            defaultTTL: .seconds(self.defaultTTLSeconds),
            accessRefresh: .seconds(self.accessRefreshSeconds),
            maintenanceInterval: .seconds(self.maintenanceSeconds),
            collapseWindow: .milliseconds(Int64(self.collapseWindowMilliseconds)),
            webhooks: self.webhooks ? PushConfiguration.WebhookDelivery(
                timeout: .seconds(self.webhookTimeoutSeconds), attempts: self.webhookAttempts,
                firstRetry: .seconds(self.webhookRetrySeconds)) : nil,
            wakes: try self.wakeRoute().map { route in
                PushConfiguration.WakeDelivery(route: route, ackWait: .seconds(self.wakeAfterSeconds), perHour: self.wakesPerHour)
            },
            version: ServerVersion.current)
        try await ServiceMain.run(service: "push", identifier: "screentime-pushd", version: ServerVersion.current, options: self.options) { environment in
            try await .push(configuration, environment: environment)
        }
    }
}

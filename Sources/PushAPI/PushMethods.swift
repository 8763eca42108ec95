import RPCCore
import StoreAPI

/// The push service's methods (`screentime-pushd`, socket `push.sock`).
///
/// Devices call with their credential (`auth.token`); local services (no `auth`) may
/// send notifications with `push.notify` and list any family's subscriptions.
public enum PushMethods {
    public static let subscribe = MethodSpec<SubscribeParams, Subscription>(
        "push.subscribe", summary: "Subscribes the calling device to record changes: a query (record type and filters), a zone, or the whole family.",
        callers: .devices,
        errors: [.unauthorized, .forbidden, .invalidParams, .notFound, .conflict, .limitExceeded])
    public static let unsubscribe = MethodSpec<SubscriptionParams, UnsubscribeResult>(
        "push.unsubscribe", summary: "Removes one of the calling device's subscriptions.",
        callers: .devices,
        errors: [.unauthorized, .notFound])
    public static let listSubscriptions = MethodSpec<ListSubscriptionsParams, ListSubscriptionsResult>(
        "push.listSubscriptions", summary: "The calling device's subscriptions (local services: a family's).",
        callers: [.local, .parent, .child],
        errors: [.unauthorized, .invalidParams])
    public static let listening = MethodSpec<ListeningParams, ListeningResult>(
        "push.listening", summary: "The devices of a family connected now: those with a push.listen stream open (a parent: its own family's; a local service: any family's).",
        callers: [.local, .parent],
        errors: [.unauthorized, .forbidden, .invalidParams])
    public static let listen = StreamSpec<ListenParams, PushNotification, ListenEnd>(
        "push.listen", summary: "The calling device's notifications: first those queued and not acknowledged, then live ones, each with the device's next sequence number.",
        callers: .devices,
        errors: [.unauthorized, .limitExceeded])
    public static let ack = MethodSpec<AckParams, AckResult>(
        "push.ack", summary: "Acknowledges the calling device's notifications up to a sequence number: they leave its queue.",
        callers: .devices,
        errors: [.unauthorized, .invalidParams])
    public static let notify = MethodSpec<NotifyParams, NotifyResult>(
        "push.notify", summary: "Queues a notification for a device, or for every active parent of a family, and delivers it live. Local services only.",
        callers: .local,
        errors: [.forbidden, .invalidParams, .notFound])
    public static let setWebhook = MethodSpec<SetWebhookParams, WebhookInfo>(
        "push.setWebhook", summary: "Sets the calling device's HTTP endpoint (UnifiedPush or ntfy): notifications it is not listening for are posted there, with retries. Only when the service runs with --webhooks.",
        callers: .devices,
        errors: [.unauthorized, .invalidParams, .unavailable])
    public static let getWebhook = MethodSpec<Empty, WebhookInfo>(
        "push.getWebhook", summary: "The calling device's webhook: where, in what format, and how deliveries are going.",
        callers: .devices,
        errors: [.unauthorized, .notFound])
    public static let removeWebhook = MethodSpec<Empty, RemoveWebhookResult>(
        "push.removeWebhook", summary: "Removes the calling device's webhook; what was waiting to be posted is dropped (it stays in the device's queue).",
        callers: .devices,
        errors: [.unauthorized])
    public static let registerWake = MethodSpec<RegisterWakeParams, WakeInfo>(
        "push.registerWake", summary: "Registers the calling device for wakes: the handle a wake relay sealed for its APNs token. When the device is not listening (or does not acknowledge in time), the server asks the relay to wake it. Only when the service runs with --wake-relay.",
        callers: .devices,
        errors: [.unauthorized, .invalidParams, .unavailable])
    public static let getWake = MethodSpec<Empty, WakeInfo>(
        "push.getWake", summary: "The calling device's wake registration: active or gone, and how the last wake went.",
        callers: .devices,
        errors: [.unauthorized, .notFound])
    public static let removeWake = MethodSpec<Empty, RemoveWakeResult>(
        "push.removeWake", summary: "Removes the calling device's wake registration: it is no longer woken.",
        callers: .devices,
        errors: [.unauthorized])
    public static let listWakes = MethodSpec<ListWakesParams, ListWakesResult>(
        "push.listWakes", summary: "The wake registrations of a family's devices and how their last wakes went (a parent: its own family's; a local service: any family's).",
        callers: [.local, .parent],
        errors: [.unauthorized, .forbidden, .invalidParams])
    public static let backup = MethodSpec<BackupParams, BackupResult>(
        "push.backup", summary: "Writes a consistent online copy of push's database (subscriptions, queued notifications, webhooks, wakes) into its backups directory under a plain file name; `lastSeq` is its position in the store's change log. Local administration only.",
        callers: .local,
        errors: [.forbidden, .invalidParams, .conflict, .unavailable])
}

extension PushMethods {
    /// Every method of the push service, in the order `rpc.describe` lists them. The service's
    /// method table is built against this list, and the gateway allows devices what it says.
    public static let list = MethodList(service: "push", [
        subscribe,
        unsubscribe,
        listSubscriptions,
        listening,
        listen,
        ack,
        notify,
        setWebhook,
        getWebhook,
        removeWebhook,
        registerWake,
        getWake,
        removeWake,
        listWakes,
        backup,
    ])
}

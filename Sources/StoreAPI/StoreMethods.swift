import RPCCore

/// The record store's methods (`screentime-stored`, socket `store.sock`). Declared once,
/// here, for the store and for every client.
///
/// A call without `auth` comes from a local service and may do anything; a call with
/// `auth` acts for the device that holds the token (see `docs/protocol.md`, "Who may do what").
public enum StoreMethods {
    // Families and zones
    public static let createFamily = MethodSpec<CreateFamilyParams, FamilyInfo>(
        "store.createFamily", summary: "Creates a family (the top-level scope) with its `default` zone. Local services only.",
        callers: .local,
        errors: [.forbidden, .conflict])
    public static let listFamilies = MethodSpec<Empty, ListFamiliesResult>(
        "store.listFamilies", summary: "Lists the families. Local services only.",
        callers: .local, errors: [.forbidden])
    public static let createZone = MethodSpec<ZoneParams, ZoneInfo>(
        "store.createZone", summary: "Creates a custom zone in a family (parents and local services).",
        callers: [.local, .parent],
        errors: [.unauthorized, .forbidden, .notFound, .conflict])
    public static let deleteZone = MethodSpec<ZoneParams, DeleteZoneResult>(
        "store.deleteZone", summary: "Deletes a zone and every record in it; change feeds report it.",
        callers: [.local, .parent],
        errors: [.unauthorized, .forbidden, .notFound])
    public static let listZones = MethodSpec<FamilyParams, ListZonesResult>(
        "store.listZones", summary: "Lists the zones of a family the caller may read.",
        callers: [.local, .parent, .child],
        errors: [.unauthorized, .forbidden, .notFound])

    // Records
    public static let modify = MethodSpec<ModifyParams, ModifyResult>(
        "store.modify",
        summary: "Saves and deletes records in one zone (at most 400), per item or atomically, idempotent with a requestId.",
        callers: [.local, .parent, .child],
        errors: [.unauthorized, .forbidden, .notFound, .conflict, .pairingUnconfirmed])
    public static let fetch = MethodSpec<FetchParams, FetchResult>(
        "store.fetch", summary: "Fetches records by name; reports the missing ones.",
        callers: [.local, .parent, .child],
        errors: [.unauthorized, .forbidden, .notFound])
    public static let query = MethodSpec<QueryParams, QueryResult>(
        "store.query", summary: "Records of one type matching filters on indexed fields, sorted, paged with a cursor.",
        callers: [.local, .parent, .child],
        errors: [.unauthorized, .forbidden, .notFound])

    // Change feeds
    public static let zoneChanges = MethodSpec<ZoneChangesParams, ZoneChangesResult>(
        "store.zoneChanges", summary: "Records saved and deleted in a zone since a change token, and a new token.",
        callers: [.local, .parent, .child],
        errors: [.unauthorized, .forbidden, .notFound, .changeTokenExpired])
    public static let databaseChanges = MethodSpec<DatabaseChangesParams, DatabaseChangesResult>(
        "store.databaseChanges", summary: "Zones of a family changed or deleted since a token, and a new token.",
        callers: [.local, .parent, .child],
        errors: [.unauthorized, .forbidden, .notFound, .changeTokenExpired])
    public static let watch = StreamSpec<WatchParams, ChangeEvent, WatchEnd>(
        "store.watch", summary: "Every committed change in commit order, resumable from a sequence number. Local services only.",
        callers: .local,
        errors: [.forbidden, .changeTokenExpired])

    // Shares
    public static let share = MethodSpec<ShareParams, ShareInfo>(
        "store.share", summary: "Shares a zone with devices of its family, each read-only or read-write (parents and local services).",
        callers: [.local, .parent],
        errors: [.unauthorized, .forbidden, .notFound, .invalidParams])
    public static let unshare = MethodSpec<UnshareParams, ShareInfo>(
        "store.unshare", summary: "Removes devices from a zone's share; takes effect on their next request.",
        callers: [.local, .parent],
        errors: [.unauthorized, .forbidden, .notFound])
    public static let shareInfo = MethodSpec<ZoneParams, ShareInfo>(
        "store.shareInfo", summary: "The participants of a zone's share.",
        callers: [.local, .parent, .child], errors: [.unauthorized, .forbidden, .notFound])

    // Credentials
    public static let putCredential = MethodSpec<PutCredentialParams, CredentialInfo>(
        "store.putCredential", summary: "Records a device credential (its token's SHA-256). Local services only.",
        callers: .local,
        errors: [.forbidden, .notFound, .conflict])
    public static let updateCredential = MethodSpec<UpdateCredentialParams, CredentialInfo>(
        "store.updateCredential", summary: "Confirms or revokes a device credential, optionally only from a given status. Local services only.",
        callers: .local,
        errors: [.forbidden, .notFound, .conflict])
    public static let listCredentials = MethodSpec<ListCredentialsParams, ListCredentialsResult>(
        "store.listCredentials", summary: "The device credentials of a family, or of one of its devices (never the tokens). Local services only.",
        callers: .local,
        errors: [.forbidden, .notFound])
    public static let credentialSnapshot = MethodSpec<Empty, CredentialSnapshotResult>(
        "store.credentialSnapshot", summary: "Every device credential with its token's SHA-256, and the change-log position they are current at, for a service that keeps them locally. Local services only.",
        callers: .local,
        errors: [.forbidden])
    public static let whoami = MethodSpec<Empty, WhoAmIResult>(
        "store.whoami", summary: "Who the store takes the caller for.",
        callers: [.local, .parent, .child], errors: [.unauthorized])

    // Maintenance
    public static let schema = MethodSpec<Empty, SchemaResult>(
        "store.schema", summary: "The record types, fields, indexes and constraints in force.",
        callers: [.local, .parent, .child])
    public static let backup = MethodSpec<BackupParams, BackupResult>(
        "store.backup", summary: "Writes a consistent online copy of the database, while writes go on, into the store's backups directory under a plain file name. Local services only.",
        callers: .local,
        errors: [.forbidden, .invalidParams, .conflict, .unavailable])
    public static let purge = MethodSpec<PurgeParams, PurgeResult>(
        "store.purge", summary: "Purges tombstones and change-log entries older than the grace period now. Local services only.",
        callers: .local,
        errors: [.forbidden])
    public static let stats = MethodSpec<Empty, StatsResult>(
        "store.stats", summary: "Writes and commits since the store started (how many writes share an fsync). Local services only.",
        callers: .local,
        errors: [.forbidden])
}

extension StoreMethods {
    /// Every method of the store service, in the order `rpc.describe` lists them. The service's
    /// method table is built against this list, and the gateway allows devices what it says.
    public static let list = MethodList(service: "store", [
        createFamily,
        listFamilies,
        createZone,
        deleteZone,
        listZones,
        modify,
        fetch,
        query,
        zoneChanges,
        databaseChanges,
        watch,
        share,
        unshare,
        shareInfo,
        putCredential,
        updateCredential,
        listCredentials,
        credentialSnapshot,
        whoami,
        schema,
        backup,
        purge,
        stats,
    ])
}

import Foundation
import RPCCore
import StoreAPI

// Bootstrap

/// `pairing.createFamily` (local only): the family, and the first parent's enrollment code.
public struct NewFamilyParams: Codable, Sendable, Hashable {
    public var family: String
    public var displayName: String?
    /// IANA time zone of the family's days (default UTC).
    public var timeZone: String?

    public init(family: String, displayName: String? = nil, timeZone: String? = nil) {
        self.family = family
        self.displayName = displayName
        self.timeZone = timeZone
    }
}

/// A one-time code that enrolls one parent device. Give it to the parent; it is shown once.
public struct EnrollmentCode: Codable, Sendable, Hashable {
    public var family: String
    public var code: String
    public var role: DeviceRole
    public var expiresAt: Date
    /// The gateway's URLs, for a device that enrolls over the network; absent when the
    /// server has no gateway yet.
    public var urls: [String]?
    /// The gateway's key pin (see ``PairingURI/pin``); absent with `urls`.
    public var pin: String?

    public init(family: String, code: String, role: DeviceRole, expiresAt: Date, urls: [String]? = nil, pin: String? = nil) {
        self.family = family
        self.code = code
        self.role = role
        self.expiresAt = expiresAt
        self.urls = urls
        self.pin = pin
    }
}

/// `pairing.inviteParent` (an admin parent): a code for a co-parent's device.
public struct InviteParentParams: Codable, Sendable, Hashable {
    /// Default `co_parent`.
    public var role: DeviceRole?
    public init(role: DeviceRole? = nil) { self.role = role }
}

/// `pairing.enrollParent` (no credential: the code is the proof).
public struct EnrollParentParams: Codable, Sendable, Hashable {
    public var family: String
    public var code: String
    public var deviceId: String
    public var deviceName: String
    public var displayName: String?

    public init(family: String, code: String, deviceId: String, deviceName: String, displayName: String? = nil) {
        self.family = family
        self.code = code
        self.deviceId = deviceId
        self.deviceName = deviceName
        self.displayName = displayName
    }
}

/// A device's credential: its token is shown once and stored by the server only as a hash.
public struct DeviceCredential: Codable, Sendable, Hashable {
    public var family: String
    public var deviceId: String
    public var role: DeviceRole
    public var status: CredentialStatus
    /// Send as `auth.token` with every request.
    public var token: String

    public init(family: String, deviceId: String, role: DeviceRole, status: CredentialStatus, token: String) {
        self.family = family
        self.deviceId = deviceId
        self.role = role
        self.status = status
        self.token = token
    }
}

// Invitations

/// `pairing.createInvitation` (a parent): a child device's invitation.
public struct CreateInvitationParams: Codable, Sendable, Hashable {
    /// The child's opaque id (no names or account ids); an existing child gets another device.
    public var childId: String
    /// How the parent calls the child, for their own screens.
    public var childName: String?
    /// Seconds until it expires (default: the service's `--invitation-ttl`, 600).
    public var expiresInSeconds: Double?

    public init(childId: String, childName: String? = nil, expiresInSeconds: Double? = nil) {
        self.childId = childId
        self.childName = childName
        self.expiresInSeconds = expiresInSeconds
    }
}

public struct Invitation: Codable, Sendable, Hashable {
    public var family: String
    public var invitationId: String
    /// Shown once; the server keeps only its hash. The parent's device keeps it to derive
    /// the short code.
    public var secret: String
    /// The pairing URI to show as a QR code.
    public var uri: String
    /// The child's zone, `ChildMonitoring-<id>`.
    public var zone: String
    public var childId: String
    public var parentDeviceId: String
    public var expiresAt: Date

    public init(family: String, invitationId: String, secret: String, uri: String, zone: String, childId: String, parentDeviceId: String, expiresAt: Date) {
        self.family = family
        self.invitationId = invitationId
        self.secret = secret
        self.uri = uri
        self.zone = zone
        self.childId = childId
        self.parentDeviceId = parentDeviceId
        self.expiresAt = expiresAt
    }
}

/// `pairing.acceptInvitation` (no credential: the secret is the proof).
public struct AcceptInvitationParams: Codable, Sendable, Hashable {
    public var family: String
    public var invitationId: String
    public var secret: String
    public var deviceId: String
    public var deviceName: String

    public init(family: String, invitationId: String, secret: String, deviceId: String, deviceName: String) {
        self.family = family
        self.invitationId = invitationId
        self.secret = secret
        self.deviceId = deviceId
        self.deviceName = deviceName
    }
}

public struct AcceptedInvitation: Codable, Sendable, Hashable {
    /// The child's credential, `pending` until a parent confirms.
    public var credential: DeviceCredential
    public var zone: String
    public var childId: String
    public var parentDeviceId: String
    /// What this device shows; the parent's device shows the same when it is really this one.
    public var shortCode: ShortCode

    public init(credential: DeviceCredential, zone: String, childId: String, parentDeviceId: String, shortCode: ShortCode) {
        self.credential = credential
        self.zone = zone
        self.childId = childId
        self.parentDeviceId = parentDeviceId
        self.shortCode = shortCode
    }
}

public enum InvitationStatus: String, StringEnum {
    /// Waiting for a child device.
    case open
    /// A child device accepted; waiting for the parent to compare codes.
    case accepted
    case confirmed
    case rejected
    /// Too many wrong secrets.
    case locked
    /// An enrollment code that was used.
    case used
    /// Past its expiry time, unused.
    case expired
}

/// `pairing.invitationStatus`, `pairing.confirm`, `pairing.reject` (a parent).
public struct InvitationParams: Codable, Sendable, Hashable {
    public var invitationId: String
    public init(invitationId: String) { self.invitationId = invitationId }
}

public struct InvitationInfo: Codable, Sendable, Hashable {
    public var invitationId: String
    public var status: InvitationStatus
    public var zone: String
    public var childId: String
    public var parentDeviceId: String
    /// The device that accepted it: with the secret, what the parent derives the short code from.
    public var deviceId: String?
    public var deviceName: String?
    public var expiresAt: Date

    public init(invitationId: String, status: InvitationStatus, zone: String, childId: String, parentDeviceId: String,
                deviceId: String?, deviceName: String?, expiresAt: Date) {
        self.invitationId = invitationId
        self.status = status
        self.zone = zone
        self.childId = childId
        self.parentDeviceId = parentDeviceId
        self.deviceId = deviceId
        self.deviceName = deviceName
        self.expiresAt = expiresAt
    }
}

// Devices

/// `pairing.revokeDevice` (a parent).
public struct DeviceParams: Codable, Sendable, Hashable {
    public var deviceId: String
    public init(deviceId: String) { self.deviceId = deviceId }
}

/// `pairing.removeChild` (an admin parent).
public struct RemoveChildParams: Codable, Sendable, Hashable {
    public var childId: String
    public init(childId: String) { self.childId = childId }
}

public struct RemoveChildResult: Codable, Sendable, Hashable {
    /// The zones deleted with their records.
    public var zones: [String]
    /// The devices whose credentials were revoked.
    public var revokedDevices: [String]
    public init(zones: [String], revokedDevices: [String]) {
        self.zones = zones
        self.revokedDevices = revokedDevices
    }
}

public struct DeviceInfo: Codable, Sendable, Hashable {
    public var deviceId: String
    public var deviceName: String?
    public var role: DeviceRole
    public var status: CredentialStatus
    /// For a child device: its child and zone.
    public var childId: String?
    public var zone: String?
    public var pairedAt: Date
    /// Its last request to the store since the store started.
    public var lastSeenAt: Date?

    public init(deviceId: String, deviceName: String?, role: DeviceRole, status: CredentialStatus, childId: String?, zone: String?,
                pairedAt: Date, lastSeenAt: Date?) {
        self.deviceId = deviceId
        self.deviceName = deviceName
        self.role = role
        self.status = status
        self.childId = childId
        self.zone = zone
        self.pairedAt = pairedAt
        self.lastSeenAt = lastSeenAt
    }
}

extension DeviceInfo {
    /// How the dashboard names the parent device each browser sign-in makes.
    public static let browserSessionPrefix = "browser-"

    /// A browser's sign-in to the dashboard (signing out revokes it), not a phone or tablet.
    public var isBrowserSession: Bool { self.deviceId.hasPrefix(Self.browserSessionPrefix) }
}

public struct ListDevicesResult: Codable, Sendable, Hashable {
    public var family: String
    public var devices: [DeviceInfo]
    public init(family: String, devices: [DeviceInfo]) {
        self.family = family
        self.devices = devices
    }
}

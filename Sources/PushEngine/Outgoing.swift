import Foundation
import PushAPI
import RPCCore

/// A notification numbered for one device, as it goes on the wire: encoded once per
/// change (``PushNotification/numbered(_:unnumbered:)``), not once per device.
struct Outgoing: Sendable {
    var seq: Int64
    var expiresAt: Date
    var json: EncodedJSON
}

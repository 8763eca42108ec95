import Crypto
import Foundation
import RelayCore
import Testing
import TestSupport
import WakeTestSupport

/// A handle is not forever: it holds when it was sealed and which key sealed it, so it
/// expires, and the publisher can rotate its sealing key without every device at once.
@Suite("Relay: handles that expire and keys that rotate", .serialized)
struct HandleTests {
    static let registration = WakeRegistration(token: LocalRelay.token(0x80), topic: "com.example.app", environment: .production,
                                               pin: Data(repeating: 7, count: 32).base64EncodedString())

    @Test("a handle opens until its lifetime is over, then says it expired; a v1 handle (no time in it) is refused as expired; a changed one is invalid")
    func lifetime() throws {
        let sealer = HandleSealer(key: SymmetricKey(size: .bits256), lifetime: 30 * 86_400)
        let sealed = Date(timeIntervalSince1970: 1_800_000_000)
        let handle = try sealer.seal(Self.registration, now: sealed)
        #expect(handle.hasPrefix("v2.\(sealer.sealingKeyId).") && !handle.contains(Self.registration.token))
        #expect(try sealer.open(handle, now: sealed + 29 * 86_400) == Self.registration)
        #expect(throws: RelayError.handleExpired("was sealed 31 days ago and is good for 30")) { try sealer.open(handle, now: sealed + 31 * 86_400) }
        let old = "v1." + String(repeating: "A", count: 80)
        #expect(throws: RelayError.handleExpired("was sealed by an older relay, with no expiry")) { try sealer.open(old) }
        var changed = Array(handle)
        changed[changed.count - 5] = changed[changed.count - 5] == "A" ? "B" : "A"
        #expect(throws: RelayError.invalidHandle) { try sealer.open(String(changed), now: sealed) }
        #expect(RelayError.handleExpired("x").code == "invalid_handle" && RelayError.handleExpired("x").status == 400)
    }

    @Test("keys rotate: a relay with a new key and the old one seals with the new and opens both; once the old key is dropped its handles are refused as expired, the new ones open")
    func rotation() throws {
        let oldKey = SymmetricKey(size: .bits256), newKey = SymmetricKey(size: .bits256)
        let before = HandleSealer(key: oldKey)
        let oldHandle = try before.seal(Self.registration)
        let overlap = HandleSealer(keys: [newKey, oldKey])
        let newHandle = try overlap.seal(Self.registration)
        #expect(newHandle.hasPrefix("v2.\(overlap.sealingKeyId).") && overlap.sealingKeyId != before.sealingKeyId)
        #expect(try overlap.open(oldHandle) == Self.registration)
        #expect(try overlap.open(newHandle) == Self.registration)
        let after = HandleSealer(key: newKey)
        #expect(throws: RelayError.handleExpired("was sealed with a key this relay no longer holds")) { try after.open(oldHandle) }
        #expect(try after.open(newHandle) == Self.registration)
    }

    @Test("through the relay: an old key kept beside the new one still wakes its devices; visible alerts are limited per device an hour, background wakes are not")
    func rotationAndAlertsThroughTheRelay() async throws {
        let apns = try await TestAPNs()
        defer { apns.stop() }
        let server = P256.Signing.PrivateKey()
        let first = try await LocalRelay(apns: apns)
        let oldHandle = try await first.seal(token: LocalRelay.token(0x81), pin: LocalRelay.pin(server))
        await first.stop()
        let rotated = try await LocalRelay(apns: apns) { configuration in
            configuration.sealingKeys.append(first.sealingKey)
            configuration.alertsPerHourPerDevice = 2
        }
        #expect(try await rotated.wake(oldHandle, as: server).status == 200, "the old key still opens its handles")
        let newHandle = try await rotated.seal(token: LocalRelay.token(0x82), pin: LocalRelay.pin(server))
        for _ in 0..<2 { #expect(try await rotated.wake(newHandle, kind: "alert", as: server).status == 200) }
        let third = try await rotated.wake(newHandle, kind: "alert", as: server)
        #expect(third.status == 429 && third.headers["retry-after"] != nil, "\(third)")
        #expect(try await rotated.wake(newHandle, as: server).status == 200, "background wakes go on")
        await rotated.stop()
        let withoutOld = try await LocalRelay(apns: apns, sealingKey: rotated.sealingKey)
        let refused = try await withoutOld.wake(oldHandle, as: server)
        #expect(refused.status == 400 && refused.body["error"] as? String == "invalid_handle"
                && (refused.body["message"] as? String)?.contains("no longer holds") == true, "\(refused)")
        await withoutOld.stop()
    }
}

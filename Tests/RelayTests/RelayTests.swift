import WakeTestSupport
import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import NIOCore
import NIOSSL
import RelayCore
import RelayServer
import ServiceLifecycle
import Synchronization
import Testing
import TestSupport

/// The wake relay through real TLS: an app seals its token, a home server signs wakes with
/// its gateway's key, and the relay pushes to the APNs stand-in, keeping nothing.
@Suite("Relay: sealed handles, signed wakes, APNs", .serialized)
struct RelayTests {
    static func token(_ byte: UInt8) -> String { LocalRelay.token(byte) }
    static func pin(_ key: P256.Signing.PrivateKey) -> String { LocalRelay.pin(key) }

    @Test("an app seals its token for its home server; the server's signed wake reaches APNs as one silent background push, over HTTP/2, with a valid provider token; an alert is content-free")
    func sealAndWake() async throws {
        let apns = try await TestAPNs()
        defer { apns.stop() }
        let relay = try await LocalRelay(apns: apns)
        let server = P256.Signing.PrivateKey()
        let handle = try await relay.seal(token: Self.token(0xab), pin: Self.pin(server))
        #expect(handle.hasPrefix("v2.") && !handle.contains(Self.token(0xab)), "the handle hides the token")

        let woken = try await relay.wake(handle, as: server, collapseId: "config")
        #expect(woken.status == 200 && (woken.body["apnsId"] as? String)?.isEmpty == false, "\(woken)")
        let push = try #require(apns.pushes.first)
        #expect(apns.pushes.count == 1 && push.token == Self.token(0xab) && push.http2)
        #expect(push.headers["apns-push-type"] == "background" && push.headers["apns-priority"] == "5" && push.headers["apns-topic"] == apns.topic)
        #expect(push.headers["apns-collapse-id"] == "config" && push.payload == #"{"aps":{"content-available":1}}"#)

        let alert = try await relay.wake(handle, kind: "alert", as: server)
        #expect(alert.status == 200)
        let shown = try #require(apns.pushes.last)
        #expect(shown.headers["apns-push-type"] == "alert" && shown.headers["apns-priority"] == "10")
        #expect(shown.payload.contains("New activity") && shown.payload.contains(#""mutable-content":1"#))
        await relay.stop()
    }

    @Test("a handle woken by another server's key, a changed handle, a bad, stale or replayed signature and bad input are refused with a code and a sentence; nothing of them reaches APNs")
    func refusals() async throws {
        let apns = try await TestAPNs()
        defer { apns.stop() }
        let relay = try await LocalRelay(apns: apns)
        let server = P256.Signing.PrivateKey(), thief = P256.Signing.PrivateKey()
        let handle = try await relay.seal(token: Self.token(0x01), pin: Self.pin(server))

        let stolen = try await relay.wake(handle, as: thief)
        #expect(stolen.status == 403 && stolen.body["error"] as? String == "wrong_server", "\(stolen)")
        var tampered = Array(handle)
        tampered[10] = tampered[10] == "A" ? "B" : "A"
        let changed = try await relay.wake(String(tampered), as: server)
        #expect(changed.status == 400 && changed.body["error"] as? String == "invalid_handle")
        let stale = try await relay.wake(handle, as: server, time: Date().addingTimeInterval(-3600))
        #expect(stale.status == 401 && (stale.body["message"] as? String)?.contains("clock") == true, "\(stale)")
        let body = Array(try JSONSerialization.data(withJSONObject: ["handle": handle, "kind": "background"]))
        var headers = try WakeSignature.headers(body: body, key: server)
        headers[2].1 = try WakeSignature.headers(body: Array("other".utf8), key: server)[2].1
        let forged = try await relay.post("/v1/wake", body, headers: headers)
        #expect(forged.status == 401 && forged.body["error"] as? String == "bad_signature")
        let signed = try WakeSignature.headers(body: body, key: server)
        #expect(try await relay.post("/v1/wake", body, headers: signed).status == 200)
        let replayed = try await relay.post("/v1/wake", body, headers: signed)
        #expect(replayed.status == 401 && (replayed.body["message"] as? String)?.contains("sent already") == true, "\(replayed)")
        let unsigned = try await relay.post("/v1/wake", body)
        #expect(unsigned.status == 401 && (unsigned.body["message"] as? String)?.contains(WakeSignature.keyHeader) == true)
        let otherTopic = try await relay.post("/v1/seal", Array(try JSONSerialization.data(withJSONObject: [
            "token": Self.token(0x02), "topic": "com.other.app", "environment": "production", "pin": Self.pin(server)])))
        #expect(otherTopic.status == 400 && (otherTopic.body["message"] as? String)?.contains("does not push to com.other.app") == true)
        let notJSON = try await relay.post("/v1/seal", Array("nope".utf8))
        #expect(notJSON.status == 400 && notJSON.body["error"] as? String == "invalid_request")
        let notUTF8 = try await relay.post("/v1/seal", [UInt8(ascii: "{"), 0xFF, 0xFE, UInt8(ascii: "}")])
        #expect(notUTF8.status == 400 && notUTF8.body["error"] as? String == "invalid_request", "\(notUTF8)")
        let deep = Array((String(repeating: "[", count: 600) + String(repeating: "]", count: 600)).utf8)
        let tooDeep = try await relay.post("/v1/wake", deep, headers: try WakeSignature.headers(body: deep, key: server))
        #expect(tooDeep.status == 400 && tooDeep.body["error"] as? String == "invalid_request", "\(tooDeep)")
        for (field, value) in [("id", String(repeating: "x", count: 65)), ("collapseId", String(repeating: "c", count: 65))] {
            let long = Array(try JSONSerialization.data(withJSONObject: ["handle": handle, "kind": "background", field: value]))
            let refused = try await relay.post("/v1/wake", long, headers: try WakeSignature.headers(body: long, key: server))
            #expect(refused.status == 400 && (refused.body["message"] as? String)?.contains("\(field) must be at most 64 bytes") == true, "\(refused)")
        }
        #expect(apns.pushes.count == 1, "only the one signed wake, once")
        await relay.stop()
    }

    @Test("APNs's answers: 410 and BadDeviceToken say the device is gone (410), 429 is passed back as 429 with Retry-After and not retried, 500 is retried, an expired provider token is renewed once")
    func apnsAnswers() async throws {
        let apns = try await TestAPNs()
        defer { apns.stop() }
        let relay = try await LocalRelay(apns: apns)
        let server = P256.Signing.PrivateKey()
        let gone = Self.token(0x10), bad = Self.token(0x11), busy = Self.token(0x12), expired = Self.token(0x13), down = Self.token(0x14)
        let tooOften = Self.token(0x15)
        // Each device sealed first (its handle comes by push), then APNs's answers to its wake set.
        var handles: [String: String] = [:]
        for token in [gone, bad, busy, tooOften, expired, down] { handles[token] = try await relay.seal(token: token, pin: Self.pin(server)) }
        apns.answer(gone, [(410, "Unregistered")])
        apns.answer(bad, [(400, "BadDeviceToken")])
        apns.answer(busy, [(500, "InternalServerError"), (500, "InternalServerError")])
        apns.answer(tooOften, [(429, "TooManyRequests")])
        apns.answer(expired, [(403, "ExpiredProviderToken")])
        apns.answer(down, [(503, "ServiceUnavailable"), (503, "ServiceUnavailable"), (503, "ServiceUnavailable")])
        for token in [gone, bad] {
            let reply = try await relay.wake(handles[token]!, as: server)
            #expect(reply.status == 410 && reply.body["error"] as? String == "unregistered", "\(reply)")
        }
        #expect(try await relay.wake(handles[busy]!, as: server).status == 200)
        let limited = try await relay.wake(handles[tooOften]!, as: server)
        #expect(limited.status == 429 && limited.body["error"] as? String == "rate_limited" && limited.headers["retry-after"] == "60"
                && (limited.body["message"] as? String)?.contains("pushed to too often") == true, "\(limited)")
        #expect(try await relay.wake(handles[expired]!, as: server).status == 200)
        let unavailable = try await relay.wake(handles[down]!, as: server)
        #expect(unavailable.status == 502 && unavailable.body["error"] as? String == "apns_unavailable")
        #expect(apns.pushes.map(\.token) == [busy, expired])
        await relay.stop()
    }

    @Test("wakes are limited per home server: one past the limit gets 429 with Retry-After, another server is not held up")
    func limitPerServer() async throws {
        let apns = try await TestAPNs()
        defer { apns.stop() }
        let relay = try await LocalRelay(apns: apns, wakesPerMinute: 3)
        let busy = P256.Signing.PrivateKey(), quiet = P256.Signing.PrivateKey()
        let handle = try await relay.seal(token: Self.token(0x20), pin: Self.pin(busy))
        for _ in 1...3 { #expect(try await relay.wake(handle, as: busy).status == 200) }
        let limited = try await relay.wake(handle, as: busy)
        #expect(limited.status == 429 && limited.headers["retry-after"] != nil, "\(limited)")
        #expect(try await relay.wake(try await relay.seal(token: Self.token(0x21), pin: Self.pin(quiet)), as: quiet).status == 200)
        await relay.stop()
    }

    @Test("the relay keeps no state: a handle sealed before a restart wakes after it, with the same sealing key")
    func restartKeepsNothing() async throws {
        let apns = try await TestAPNs()
        defer { apns.stop() }
        let server = P256.Signing.PrivateKey()
        let first = try await LocalRelay(apns: apns)
        let handle = try await first.seal(token: Self.token(0x30), pin: Self.pin(server))
        await first.stop()
        let second = try await LocalRelay(apns: apns, sealingKey: first.sealingKey)
        #expect(try await second.wake(handle, as: server).status == 200)
        await second.stop()
        let otherKey = try await LocalRelay(apns: apns)
        #expect(try await otherKey.wake(handle, as: server).status == 400, "another sealing key cannot read it")
        await otherKey.stop()
    }

    @Test("a topic taken off the relay's options is pushed to no more: a handle sealed for it gets 410, and APNs hears nothing")
    func topicRemoved() async throws {
        let apns = try await TestAPNs()
        defer { apns.stop() }
        let server = P256.Signing.PrivateKey()
        let first = try await LocalRelay(apns: apns)
        let handle = try await first.seal(token: Self.token(0x40), pin: Self.pin(server))
        await first.stop()
        let narrower = try await LocalRelay(apns: apns, sealingKey: first.sealingKey) { $0.topics = ["com.example.other"] }
        let refused = try await narrower.wake(handle, as: server)
        #expect(refused.status == 410 && refused.body["error"] as? String == "unregistered"
                && (refused.body["message"] as? String)?.contains("no longer pushes to \(apns.topic)") == true, "\(refused)")
        #expect(apns.pushes.isEmpty)
        await narrower.stop()
    }

    @Test("a seal is answered 202 without the handle: the handle goes to the token in a silent push carrying it and nothing else; a token APNs refuses gets 410 and no handle; a device sealed for too often in an hour gets 429")
    func handleGoesToTheToken() async throws {
        let apns = try await TestAPNs()
        defer { apns.stop() }
        let relay = try await LocalRelay(apns: apns) { $0.sealsPerHourPerDevice = 2 }
        let server = P256.Signing.PrivateKey()
        let seal = { (token: String) in
            try await relay.post("/v1/seal", Array(try JSONSerialization.data(withJSONObject: [
                "token": token, "topic": apns.topic, "environment": "production", "pin": Self.pin(server)])))
        }
        let sealed = try await seal(Self.token(0x40))
        #expect(sealed.status == 202 && sealed.body["handle"] == nil && sealed.body["delivery"] as? String == "push", "\(sealed)")
        let delivery = try await apns.deliveries.wait(for: 1)[0]
        #expect(delivery.token == Self.token(0x40))
        #expect(delivery.push.headers["apns-push-type"] == "background" && delivery.push.headers["apns-priority"] == "5")
        let payload = try #require(try JSONSerialization.jsonObject(with: Data(delivery.push.payload.utf8)) as? [String: Any])
        #expect(Set(payload.keys) == ["aps", APNsPush.handleKey], "the handle and nothing else: \(payload)")
        #expect(try await relay.wake(delivery.handle, as: server).status == 200, "the pushed handle wakes")

        // A token APNs does not know gets nothing; APNs's 429 for a device is passed back.
        apns.answer(Self.token(0x41), [(410, "Unregistered")])
        let unknown = try await seal(Self.token(0x41))
        #expect(unknown.status == 410 && unknown.body["error"] as? String == "unregistered", "\(unknown)")
        apns.answer(Self.token(0x42), [(400, "BadDeviceToken")])
        #expect(try await seal(Self.token(0x42)).status == 410)
        apns.answer(Self.token(0x43), [(429, "TooManyRequests")])
        let throttled = try await seal(Self.token(0x43))
        #expect(throttled.status == 429 && throttled.headers["retry-after"] != nil, "\(throttled)")
        #expect(apns.deliveries.count == 1 && apns.pushes.count == 1, "no handle went to a refused token")

        // Sealed again at each launch: a few an hour are plenty; past them, 429.
        #expect(try await seal(Self.token(0x40)).status == 202)
        let often = try await seal(Self.token(0x40))
        #expect(often.status == 429 && often.body["error"] as? String == "rate_limited" && often.headers["retry-after"] != nil, "\(often)")
        #expect(apns.deliveries.count == 2)
        await relay.stop()
    }

    @Test("a body over 16 KiB is refused with 413 and a sentence, and the relay goes on serving; one address asking for too many seals gets 429 with Retry-After")
    func oversizedBodiesAndSealFloods() async throws {
        let apns = try await TestAPNs()
        defer { apns.stop() }
        let relay = try await LocalRelay(apns: apns, sealsPerMinute: 3)
        let server = P256.Signing.PrivateKey()
        let huge = Array(repeating: UInt8(ascii: "a"), count: 17 * 1024)
        for path in ["/v1/seal", "/v1/wake"] {
            let refused = try await relay.post(path, huge)
            #expect(refused.status == 413 && refused.body["error"] as? String == "too_large" && (refused.body["message"] as? String)?.contains("16384") == true, "\(path): \(refused)")
        }
        var handle = ""
        for byte in UInt8(0x50)...0x51 { handle = try await relay.seal(token: Self.token(byte), pin: Self.pin(server)) }
        #expect(try await relay.wake(handle, as: server).status == 200, "still serving")
        let flooded = try await relay.post("/v1/seal", Array(try JSONSerialization.data(withJSONObject: [
            "token": Self.token(0x53), "topic": apns.topic, "environment": "production", "pin": Self.pin(server)])))
        #expect(flooded.status == 429 && flooded.body["error"] as? String == "rate_limited" && flooded.headers["retry-after"] != nil, "\(flooded)")
        await relay.stop()
    }
}

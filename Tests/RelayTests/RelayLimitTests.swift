import APNs
import Crypto
import EdgeLimits
import Foundation
import Logging
import RelayCore
@testable import RelayServer
import Testing
import TestSupport
import WakeTestSupport

/// What bounds the relay's work and memory for callers it does not know: limits counted
/// before any cryptography, tables of fixed size that refuse when full, and a wake
/// remembered only once its pin matched.
@Suite("Relay: limits that hold on the open internet", .serialized)
struct RelayLimitTests {
    @Test("a sliding window allows its limit per key, refuses the next with a retry time, counts the previous window in part, and refuses a new key when it holds its capacity")
    func windowLimiter() {
        let limiter = WindowLimiter(limit: 3, window: 60, capacity: 4)
        let start = Date(timeIntervalSince1970: 6_000)  // the start of a window
        for second in 0..<3 { #expect(limiter.take("a", now: start + Double(second)) == .allowed) }
        guard case .limited(let retry) = limiter.take("a", now: start + 3) else { Issue.record("a fourth in the window was allowed"); return }
        #expect((1...60).contains(retry))
        #expect(limiter.take("b", now: start + 3) == .allowed, "another key is not held up")
        // Half way through the next window, half of the last one's three still count.
        #expect(limiter.take("a", now: start + 90) == .allowed)
        #expect(limiter.take("a", now: start + 90) == .limited(retryAfterSeconds: 30))
        // Full: three keys more fit in this window (a is one of its four), a fourth does not.
        #expect(limiter.take("c", now: start + 91) == .allowed)
        #expect(limiter.take("d", now: start + 91) == .allowed)
        #expect(limiter.take("e", now: start + 91) == .allowed)
        #expect(limiter.take("f", now: start + 91) == .full(retryAfterSeconds: 29))
        // Windows later, it holds only what the last two windows counted.
        for index in 0..<1_000 { _ = limiter.take("k\(index)", now: start + 600 + Double(index % 60)) }
        #expect(limiter.keys <= 8)
    }

    @Test("the table of seen wakes refuses a wake when it is full rather than grow, and forgets a wake ten minutes on")
    func seenWakesBounded() {
        let seen = SeenWakes(capacity: 3)
        let now = Date()
        let digests = (0..<4).map { SHA256.hash(data: Data("wake \($0)".utf8)) }
        for digest in digests.prefix(3) { #expect(seen.insert(digest, now: now) == .new) }
        #expect(seen.insert(digests[0], now: now) == .seenBefore)
        #expect(seen.insert(digests[3], now: now) == .full)
        #expect(seen.count == 3)
        #expect(seen.insert(digests[3], now: now + 2 * WakeSignature.maximumAge + 1) == .new, "the old ones left")
        #expect(seen.count == 1)
    }

    @Test("wakes are counted per address before any signature is checked: past the limit an unsigned wake gets 429, not 401")
    func addressLimitBeforeCryptography() async throws {
        let apns = try await TestAPNs()
        defer { apns.stop() }
        let relay = try await LocalRelay(apns: apns) { $0.wakesPerMinutePerAddress = 5 }
        let body = Array(#"{"handle":"v1.x","kind":"background"}"#.utf8)
        for _ in 0..<5 { #expect(try await relay.post("/v1/wake", body).status == 401) }
        let limited = try await relay.post("/v1/wake", body)
        #expect(limited.status == 429 && limited.body["error"] as? String == "rate_limited" && limited.headers["retry-after"] != nil, "\(limited)")
        await relay.stop()
    }

    @Test("a wake is remembered only once its pin matched: another key's wake with the same time and body does not block the server's own; the same wake with its signature's second form (r, n - s) is a replay")
    func seenAfterThePinMatched() async throws {
        let apns = try await TestAPNs()
        defer { apns.stop() }
        let relay = try await LocalRelay(apns: apns)
        let server = P256.Signing.PrivateKey(), thief = P256.Signing.PrivateKey()
        let handle = try await relay.seal(token: LocalRelay.token(0x60), pin: LocalRelay.pin(server))
        let body = Array(try JSONSerialization.data(withJSONObject: ["handle": handle, "kind": "background"]))
        let time = Date()
        let stolen = try await relay.post("/v1/wake", body, headers: try WakeSignature.headers(body: body, key: thief, time: time))
        #expect(stolen.status == 403)
        let signed = try WakeSignature.headers(body: body, key: server, time: time)
        let own = try await relay.post("/v1/wake", body, headers: signed)
        #expect(own.status == 200, "\(own)")
        var mirrored = signed
        mirrored[2].1 = try Self.otherForm(of: signed[2].1)
        #expect(mirrored[2].1 != signed[2].1)
        let replayed = try await relay.post("/v1/wake", body, headers: mirrored)
        #expect(replayed.status == 401 && (replayed.body["message"] as? String)?.contains("sent already") == true, "\(replayed)")
        #expect(apns.pushes.count == 1)
        await relay.stop()
    }

    /// An ECDSA P-256 signature's second valid form: (r, n - s).
    static func otherForm(of base64: String) throws -> String {
        let raw = try #require(Data(base64Encoded: base64))
        let order: [UInt8] = [
            0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
            0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
        ]
        let s = Array(raw[32..<64])
        var difference = [UInt8](repeating: 0, count: 32)
        var borrow = 0
        for index in stride(from: 31, through: 0, by: -1) {
            var value = Int(order[index]) - Int(s[index]) - borrow
            borrow = value < 0 ? 1 : 0
            if value < 0 { value += 256 }
            difference[index] = UInt8(value)
        }
        return (Data(raw[0..<32]) + Data(difference)).base64EncodedString()
    }
}

extension RelayLimitTests {
    @Test("the relay's budget of pushes to APNs holds over every caller: past it a wake gets 503 busy with a retry time, and APNs hears nothing more; the next second it goes on")
    func apnsBudget() async throws {
        let apns = try await TestAPNs()
        defer { apns.stop() }
        let http = APNsClient.makeHTTPClient(trusting: apns.certificateFile)
        let url = apns.url
        let sealer = HandleSealer(key: SymmetricKey(size: .bits256))
        let relay = WakeRelay(
            sealer: sealer, topics: [apns.topic],
            apns: APNsClient(http: http, providerToken: try ProviderToken(keyId: apns.keyId, teamId: apns.teamId, p8: apns.p8),
                             baseURL: { _ in url }, attempts: 1, logger: Logger(label: "relay")),
            state: MemoryState(limits: CountLimits([.server: (1_000, 60), .device: (1_000, 60), .alert: (1_000, 3600), .seal: (1_000, 3600), .apns: (2, 1)]),
                               maximumSeenWakes: 1_000, maximumKeys: 1_000),
            logger: Logger(label: "relay"))
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        var answers: [String] = []
        for (index, second) in [0.0, 0.1, 0.2, 0.3, 2.0].enumerated() {
            // Each from a server of its own: no other limit is near.
            let server = P256.Signing.PrivateKey()
            let handle = try sealer.seal(WakeRegistration(token: LocalRelay.token(UInt8(0x90 + index)), topic: apns.topic, environment: .production,
                                                          pin: LocalRelay.pin(server)), now: now)
            let at = now + second
            let body = Array(try JSONSerialization.data(withJSONObject: ["handle": handle, "kind": "background", "id": "\(index)"]))
            let headers = try WakeSignature.headers(body: body, key: server, time: at)
            do {
                _ = try await relay.wake(body: body, key: headers[0].1, time: headers[1].1, signature: headers[2].1, now: at)
                answers.append("sent")
            } catch {
                answers.append(error.code)
            }
        }
        #expect(answers == ["sent", "sent", "busy", "busy", "sent"])
        #expect(apns.pushes.count == 3)
        try await http.shutdown()
    }
}

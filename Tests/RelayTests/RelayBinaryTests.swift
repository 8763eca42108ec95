import WakeTestSupport
import AsyncHTTPClient
import Crypto
import Foundation
import Glibc
import NIOCore
import RelayCore
import Testing
import TestSupport

/// `screentime-relayd` as its publisher runs it: options checked before anything starts,
/// its sealing key made once and kept, a wake through it, and SIGTERM a clean stop.
@Suite("Relay: the screentime-relayd binary", .serialized)
struct RelayBinaryTests {
    @Test("options that cannot work are refused with a usage error that says what to give")
    func badOptions() async throws {
        let directory = TemporaryDirectory()
        let base = ["--sealing-key-file", directory.file("sealing.key"), "--apns-key-file", directory.file("none.p8"), "--apns-key-id", "A", "--apns-team-id", "B"]
        let noTLS = try await runCommand(Binaries.path("screentime-relayd"), base + ["--topic", "com.example.app"])
        #expect(noTLS.status == 64 && noTLS.stderr.contains("--plain-http behind a reverse proxy"), "\(noTLS.stderr)")
        let noTopic = try await runCommand(Binaries.path("screentime-relayd"), base + ["--plain-http"])
        #expect(noTopic.status == 64 && noTopic.stderr.contains("--topic"), "\(noTopic.stderr)")
        let noKey = try await runCommand(Binaries.path("screentime-relayd"), base + ["--plain-http", "--topic", "com.example.app"])
        #expect(noKey.status == 1 && noKey.stderr.contains("cannot read --apns-key-file"), "\(noKey.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.file("sealing.key")), "nothing made before the options are right")
    }

    @Test("started by hand: makes its sealing key once (0600) and keeps it across a restart, seals and wakes through the APNs stand-in, and stops cleanly on SIGTERM")
    func runsAndStops() async throws {
        let apns = try await TestAPNs()
        defer { apns.stop() }
        let directory = TemporaryDirectory()
        try apns.p8.write(toFile: directory.file("apns.p8"), atomically: true, encoding: .utf8)
        let arguments = ["--plain-http", "--host", "127.0.0.1", "--port", "0", "--sealing-key-file", directory.file("keys/sealing.key"),
                         "--apns-key-file", directory.file("apns.p8"), "--apns-key-id", apns.keyId, "--apns-team-id", apns.teamId,
                         "--topic", apns.topic, "--apns-url", apns.url, "--apns-ca-file", apns.certificateFile]
        let server = P256Key()
        var handle = ""
        var sealingKey = ""
        for run in 1...2 {
            let log = directory.file("relay-\(run).log")
            let pid = try Spawn(executable: Binaries.path("screentime-relayd"), arguments: arguments, environment: ProcessInfo.processInfo.environment,
                                stdin: nil, stdout: directory.file("relay-\(run).out"), stderr: log).start()
            let port = try await eventually("the relay ready", timeout: .seconds(20)) { seen in
                let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                seen = text
                guard let range = text.range(of: #"port=\d+"#, options: .regularExpression) else { return nil as Int? }
                return Int(text[range].dropFirst(5))
            }
            let key = try String(contentsOfFile: directory.file("keys/sealing.key"), encoding: .utf8)
            let mode = try FileManager.default.attributesOfItem(atPath: directory.file("keys/sealing.key"))[.posixPermissions] as? Int
            #expect(mode == 0o600)
            if run == 1 {
                sealingKey = key
                let sealed = try await Self.post("http://127.0.0.1:\(port)/v1/seal", try JSONSerialization.data(withJSONObject: [
                    "token": String(repeating: "ab", count: 32), "topic": apns.topic, "environment": "development", "pin": server.pin]))
                #expect(sealed.status == 202 && sealed.body["handle"] == nil && sealed.body["delivery"] as? String == "push", "\(sealed)")
                handle = try await apns.handle(for: String(repeating: "ab", count: 32))
            } else {
                #expect(key == sealingKey, "the sealing key was made again")
            }
            // The handle sealed by the first run wakes through both.
            let body = try JSONSerialization.data(withJSONObject: ["handle": handle, "kind": "background"])
            let woken = try await Self.post("http://127.0.0.1:\(port)/v1/wake", body, headers: try server.sign(Array(body)))
            #expect(woken.status == 200, "\(woken)")
            kill(pid, SIGTERM)
            #expect(try await ChildExit.wait(pid, timeout: .seconds(20)) == 0, "\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        }
        #expect(apns.pushes.count == 2)
    }

    /// A home server's key, as a value that crosses tasks (swift-crypto's keys are not Sendable).
    struct P256Key {
        let raw = P256SigningKey.make()
        var pin: String { P256SigningKey.pin(self.raw) }
        func sign(_ body: [UInt8]) throws -> [(String, String)] { try P256SigningKey.headers(self.raw, body) }
    }

    static func post(_ url: String, _ body: Data, headers: [(String, String)] = []) async throws -> (status: Int, body: [String: Any]) {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/json")
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        request.body = .bytes(ByteBuffer(bytes: body))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let data = try await response.body.collect(upTo: 1 << 20)
        return (Int(response.status.code), (try? JSONSerialization.jsonObject(with: Data(Array(buffer: data)))) as? [String: Any] ?? [:])
    }
}

/// A P-256 key kept as its raw bytes, signing wakes as a home server does.
enum P256SigningKey {
    static func make() -> Data { P256.Signing.PrivateKey().rawRepresentation }
    static func pin(_ raw: Data) -> String {
        WakeSignature.pin(spki: (try! P256.Signing.PrivateKey(rawRepresentation: raw)).publicKey.derRepresentation)
    }
    static func headers(_ raw: Data, _ body: [UInt8]) throws -> [(String, String)] {
        try WakeSignature.headers(body: body, key: try P256.Signing.PrivateKey(rawRepresentation: raw))
    }
}

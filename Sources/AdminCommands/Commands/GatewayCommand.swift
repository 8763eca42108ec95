import ArgumentParser
import Foundation
import PairingAPI

/// `screentimectl gateway`: the device gateway as devices see it.
struct GatewayCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gateway",
        abstract: "Show how devices reach the server's gateway; announce it on the home network.",
        subcommands: [GatewayPin.self, GatewayAnnounce.self]
    )
}

/// `screentimectl gateway pin`: the key pin and URLs the gateway published.
struct GatewayPin: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin",
        abstract: "Print the gateway's key pin and URLs (what pairing QR codes carry).",
        discussion: """
            Reads <state-dir>/gateway/endpoint.json, which screentime-gatewayd writes when it \
            starts. The pin is the SHA-256 of the certificate's public key, base64: check it \
            with curl --pinnedpubkey sha256//PIN. It stays the same when the certificate is \
            renewed.

            Exit status: 0, or 66 when the gateway has not started yet (no endpoint file).
            """
    )

    @Option(name: .customLong("state-dir"), help: ArgumentHelp("The services' state directory.", discussion: "Default: $SCREENTIME_STATE_DIR, else .screentime/state when screentime-dev up runs here, else /var/lib/screentime.", valueName: "dir"))
    var stateDirectory: String?

    @Flag(help: "Print the endpoint as JSON.") var json = false

    func run() throws {
        let path = GatewayEndpoint.path(stateDirectory: StateDirectoryOption.resolve(self.stateDirectory))
        let endpoint: GatewayEndpoint
        do {
            guard let read = try GatewayEndpoint.read(from: path) else {
                Output.fail("screentimectl: not_found: \(path) does not exist: the gateway has not started yet (systemctl start screentime-gateway.socket, then connect once; or screentime-gatewayd --init-only)", exitCode: 66)
            }
            endpoint = read
        } catch {
            Output.fail("screentimectl: invalid_input: \(path) cannot be read: \(error)", exitCode: 65)
        }
        if self.json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            encoder.dateEncodingStrategy = .iso8601
            print(String(decoding: (try? encoder.encode(endpoint)) ?? Data(), as: UTF8.self))
            return
        }
        print("pin: sha256//\(endpoint.pin)")
        for url in endpoint.urls { print("url: \(url)") }
        print("certificate: \(endpoint.certificate) (valid until \(endpoint.notValidAfter.formatted(.iso8601)))")
    }
}

import Foundation
import PairingAPI
import RPCCore
import Testing
import StackSupport
import TestSupport

/// `screentimectl qr` as a parent uses it: the invitation's QR code, in the terminal and as
/// PNG and SVG files, read back by a real QR decoder (zbarimg; SVG rendered by rsvg-convert).
@Suite("Invitation QR codes", .serialized)
struct QRCodeTests {
    @Test("an invitation piped into screentimectl qr scans back to its URI, and the scanned secret pairs the child")
    func invitationImagesScan() async throws {
        let harness = try await PairingHarness.start()
        defer { harness.stopNow() }
        let family = try await Bootstrapped.make(harness)
        let created = try await ctl(["call", harness.pairing.socketPath, "pairing.createInvitation", #"{"childId": "emma"}"#,
                                     "--token", family.parentCredential.token, "--compact"])
        try #require(created.status == 0, "createInvitation failed: \(created.stderr)")
        let directory = TemporaryDirectory()
        let png = directory.file("invite.png"), svg = directory.file("invite.svg")

        let drawn = try await ctl(["qr", "-", "--png", png, "--svg", svg], stdin: created.stdout)
        #expect(drawn.status == 0, "\(drawn.stderr)")
        #expect(drawn.stdout.isEmpty, "with files and no --terminal nothing is printed")
        for path in [png, svg] {
            let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
            #expect(mode == 0o600, "the image holds the invitation secret, so only its owner may read it")
        }
        let scannedPNG = try await scan(png)
        let rendered = directory.file("svg-rendered.png")
        let rsvg = try await runCommand("/usr/bin/rsvg-convert", [svg, "-o", rendered])
        try #require(rsvg.status == 0, "rsvg-convert (Debian librsvg2-bin) is needed to check the SVG: \(rsvg.stderr)")
        let scannedSVG = try await scan(rendered)

        let invitation = try RPCJSON.makeDecoder().decode(Invitation.self, from: Data(created.stdout.utf8))
        #expect(scannedPNG == invitation.uri)
        #expect(scannedSVG == invitation.uri)
        let uri = try #require(PairingURI(scannedPNG))
        let accepted = try await family.admin.call(PairingMethods.acceptInvitation, AcceptInvitationParams(
            family: uri.family, invitationId: uri.invitationId, secret: uri.secret, deviceId: "emma-ipad", deviceName: "Emma's iPad"))
        #expect(accepted.childId == "emma")
    }

    @Test("the terminal rendering scans, plain and with ANSI colours, and says whose it is and when it expires")
    func terminalRenderingScans() async throws {
        let uri = PairingURI(server: "home.example", family: "smith", invitationId: "inv-1", secret: "s3cr3t-s3cr3t-s3cr3t").string
        let plain = try await ctl(["qr", uri, "--no-color"])
        #expect(plain.status == 0, "\(plain.stderr)")
        #expect(!plain.stdout.contains("\u{1B}["))
        #expect(try await scan(terminal: plain.stdout) == uri)

        let colored = try await ctl(["qr", uri, "--color", "--margin", "4"])
        #expect(colored.stdout.hasPrefix("\u{1B}[97;40m"))
        let stripped = colored.stdout.replacingOccurrences(of: "\u{1B}[97;40m", with: "").replacingOccurrences(of: "\u{1B}[0m", with: "")
        #expect(try await scan(terminal: stripped) == uri)

        let json = #"{"uri": "\#(uri)", "childId": "emma", "expiresAt": "2026-11-22T10:10:00Z"}"#
        let captioned = try await ctl(["qr", "--no-color"], stdin: json)
        #expect(captioned.stdout.contains("Scan with emma's device. Single use; expires 2026-11-22T10:10:00Z."))
    }

    @Test("an image on standard output keeps the terminal code on standard error")
    func imageOnStandardOutput() async throws {
        let run = try await ctl(["qr", "hello", "--svg", "-", "--terminal", "--no-color"])
        #expect(run.status == 0)
        #expect(run.stdout.hasPrefix("<?xml"))
        #expect(run.stderr.contains("█"))
    }

    @Test("bad input gets a clear message and the documented exit status", arguments: [
        Bad(["qr", ""], status: 65, message: "invalid_input: there is nothing to encode"),
        Bad(["qr", String(repeating: "x", count: 3000)], status: 65, message: "too long for a QR code"),
        Bad(["qr", "{not json"], status: 65, message: "invalid_json"),
        Bad(["qr", #"{"invitationId": "x"}"#], status: 65, message: #"the JSON has no "uri""#),
        Bad(["qr", "x", "--png", "/nonexistent/dir/invite.png"], status: 73, message: "cannot_write: cannot create /nonexistent/dir/invite.png"),
        Bad(["qr", "x", "--scale", "0"], status: 64, message: "--scale must be between 1 and 64"),
        Bad(["qr", "x", "--margin", "99"], status: 64, message: "--margin must be between 0 and 16"),
        Bad(["qr", "x", "--png", "-", "--svg", "-"], status: 64, message: "only one of --png and --svg"),
    ])
    func badInput(_ bad: Bad) async throws {
        let run = try await ctl(bad.arguments)
        #expect(run.status == bad.status, "\(run.stderr)")
        #expect(run.stderr.contains(bad.message), "\(run.stderr)")
    }

    struct Bad: Sendable, CustomTestStringConvertible {
        let arguments: [String]
        let status: Int32
        let message: String
        init(_ arguments: [String], status: Int32, message: String) {
            self.arguments = arguments
            self.status = status
            self.message = message
        }
        var testDescription: String { "\(self.arguments.dropFirst().joined(separator: " ").prefix(40)) → \(self.status)" }
    }
}

private func ctl(_ arguments: [String], stdin: String? = nil) async throws -> (status: Int32, stdout: String, stderr: String) {
    try await runCommand(Binaries.path("screentimectl"), arguments, stdin: stdin)
}

/// What a QR decoder reads from an image file.
private func scan(_ image: String) async throws -> String {
    guard FileManager.default.isExecutableFile(atPath: "/usr/bin/zbarimg") else {
        throw TestFailure("zbarimg is not installed (Debian zbar-tools); run .ci/run --deps-only to install what the tests need")
    }
    let run = try await runCommand("/usr/bin/zbarimg", ["--quiet", "--raw", image])
    guard run.status == 0 else { throw TestFailure("zbarimg found no QR code in \(image) (status \(run.status)): \(run.stderr)") }
    return run.stdout.trimmingCharacters(in: .newlines)
}

/// Turns half-block terminal text back into pixels (a PBM image, 4 pixels per module) and scans it.
private func scan(terminal text: String) async throws -> String {
    var rows: [[Bool]] = []  // true: dark
    for line in text.split(separator: "\n") where line.contains(where: { "█▀▄ ".contains($0) }) {
        rows.append(line.map { !"█▀".contains($0) })
        rows.append(line.map { !"█▄".contains($0) })
    }
    let scale = 4, border = 8
    let width = (rows.map(\.count).max() ?? 0) * scale + 2 * border
    let height = rows.count * scale + 2 * border
    var pbm = "P1\n\(width) \(height)\n"
    for y in 0..<height {
        let row = (y - border) / scale
        let cells = (0..<width).map { x -> String in
            let column = (x - border) / scale
            guard y >= border, x >= border, row < rows.count, column < rows[row].count else { return "0" }
            return rows[row][column] ? "1" : "0"
        }
        pbm += cells.joined(separator: " ") + "\n"
    }
    let directory = TemporaryDirectory()
    let path = directory.file("terminal.pbm")
    try Data(pbm.utf8).write(to: URL(fileURLWithPath: path))
    return try await scan(path)
}

import ArgumentParser
import OptionChecks
import Foundation
import QRCode
import RPCCore

/// `screentimectl qr`: shows a pairing invitation as a QR code for the child's device to scan.
struct QR: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "qr",
        abstract: "Show a pairing invitation (or any text) as a QR code: in the terminal, as PNG, as SVG.",
        discussion: """
            INPUT is a pairing URI (screentime://pair?...), the JSON result of \
            pairing.createInvitation, or any other text. Without --png or --svg the code is \
            printed in the terminal.

            The code carries the invitation's secret: show it only to the child's device. \
            Files are created readable by their owner only.

            Examples:
              screentimectl call pairing pairing.createInvitation '{"childId": "emma"}' | screentimectl qr
              screentimectl qr 'screentime://pair?v=1&...' --png invite.png --svg invite.svg
            """
    )

    @Argument(help: "What to encode, or - to read it from standard input.") var input: String = "-"
    @Option(help: ArgumentHelp("Also write the code as a PNG image to this file (- for standard output).", valueName: "file"))
    var png: String?
    @Option(help: ArgumentHelp("Also write the code as an SVG image to this file (- for standard output).", valueName: "file"))
    var svg: String?
    @Flag(help: "Print the code in the terminal even when writing files.") var terminal = false
    @Option(help: ArgumentHelp("Pixels per module in the PNG and the SVG's nominal size (1-64).", valueName: "pixels"))
    var scale = 8
    @Option(help: ArgumentHelp("Light modules around the code (0-16); the QR standard asks for 4, terminals use 2.", valueName: "modules"))
    var margin: Int?
    @Flag(inversion: .prefixedNo, help: "Paint the terminal code white on black with ANSI colours (default: when stdout is a terminal).")
    var color: Bool?

    func validate() throws {
        try checkOption("--scale", self.scale, in: 1...64, "pixels")
        if let margin = self.margin { try checkOption("--margin", margin, in: 0...16, "modules") }
        if self.png == "-" && self.svg == "-" { throw ValidationError("only one of --png and --svg can go to standard output") }
    }

    func run() throws {
        let invitation = self.readInvitation()
        let code: QRCode
        do {
            code = try QRCode(encoding: invitation.text)
        } catch {
            Output.fail("screentimectl: invalid_input: \(error)", exitCode: 65)
        }
        let margin = self.margin ?? QRCode.standardMargin
        if let path = self.png { Self.writeOrExit(to: path) { try code.png(scale: self.scale, margin: margin) } }
        if let path = self.svg { Self.writeOrExit(to: path) { Data(code.svg(scale: self.scale, margin: margin).utf8) } }
        guard self.terminal || (self.png == nil && self.svg == nil) else { return }
        let colors = self.color ?? (isatty(STDOUT_FILENO) == 1)
        var text = code.terminalText(margin: self.margin ?? 2, colors: colors)
        if let caption = invitation.caption { text += caption + "\n" }
        // With an image on stdout the code goes to stderr, so that both stay readable.
        let toStandardError = self.png == "-" || self.svg == "-"
        (toStandardError ? FileHandle.standardError : FileHandle.standardOutput).write(Data(text.utf8))
    }

    private struct Input {
        var text: String
        var caption: String?
    }

    /// The text to encode; from the JSON of pairing.createInvitation, its `uri` and a caption.
    private func readInvitation() -> Input {
        var text = self.input
        if text == "-" {
            text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        }
        text = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard text.hasPrefix("{") else { return Input(text: text) }
        guard case .object(let object)? = try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)) else {
            Output.fail("screentimectl: invalid_json: the input starts like JSON but is not valid JSON", exitCode: 65)
        }
        guard case .string(let uri)? = object["uri"] else {
            Output.fail("screentimectl: invalid_input: the JSON has no \"uri\"; give the result of pairing.createInvitation or a pairing URI", exitCode: 65)
        }
        var caption: String?
        if case .string(let child)? = object["childId"], case .string(let expires)? = object["expiresAt"] {
            caption = "Scan with \(child)'s device. Single use; expires \(expires)."
        }
        return Input(text: uri, caption: caption)
    }

    private static func writeOrExit(to path: String, _ image: () throws -> Data) {
        do {
            try self.write(try image(), to: path)
        } catch {
            Output.fail("screentimectl: \(error)", exitCode: 73)
        }
    }

    /// Writes owner-only (the code holds a secret); `-` is standard output.
    private static func write(_ data: Data, to path: String) throws {
        if path == "-" {
            FileHandle.standardOutput.write(data)
            return
        }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw FileError("cannot_write: cannot create \(path): \(String(cString: strerror(errno)))") }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        do {
            try handle.write(contentsOf: data)
        } catch {
            throw FileError("cannot_write: cannot write \(path): \(error.localizedDescription)")
        }
    }

    private struct FileError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}

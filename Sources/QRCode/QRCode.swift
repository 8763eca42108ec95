import CQRencode
import Foundation

/// A QR code symbol, made by libqrencode: a square of dark and light modules.
///
/// Renderers (terminal text, SVG, PNG) live in their own files; they all add a quiet
/// zone of light modules around the symbol, which scanners need to find it.
public struct QRCode: Sendable, Hashable {
    /// How much of the symbol may be damaged and still read; more costs a larger symbol.
    public enum Correction: Sendable {
        case low, medium, quartile, high

        var level: QRecLevel {
            switch self {
            case .low: QR_ECLEVEL_L
            case .medium: QR_ECLEVEL_M
            case .quartile: QR_ECLEVEL_Q
            case .high: QR_ECLEVEL_H
            }
        }
    }

    /// The quiet zone the QR specification asks for, in modules.
    public static let standardMargin = 4

    /// Modules per side.
    public let size: Int
    /// Row-major, `true` for a dark module.
    private let modules: [Bool]

    public init(encoding text: String, correction: Correction = .medium) throws(QRCodeError) {
        guard !text.isEmpty else { throw QRCodeError("there is nothing to encode: the text is empty") }
        // Byte mode keeps the text exactly as given (case and all); version 0 lets
        // libqrencode pick the smallest symbol that holds it.
        guard let symbol = QRcode_encodeString(text, 0, correction.level, QR_MODE_8, 1) else {
            if errno == ERANGE {
                throw QRCodeError("the text is too long for a QR code (\(text.utf8.count) bytes; at most 2331 at medium correction)")
            }
            throw QRCodeError("libqrencode could not encode the text: \(String(cString: strerror(errno)))")
        }
        defer { QRcode_free(symbol) }
        let size = Int(symbol.pointee.width)
        let data = UnsafeBufferPointer(start: symbol.pointee.data, count: size * size)
        self.size = size
        self.modules = data.map { $0 & 1 == 1 }  // bit 0: dark; the other bits say why
    }

    /// Whether the module at `row`, `column` is dark; outside the symbol (the quiet zone) is light.
    public subscript(row: Int, column: Int) -> Bool {
        guard (0..<self.size).contains(row), (0..<self.size).contains(column) else { return false }
        return self.modules[row * self.size + column]
    }
}

public struct QRCodeError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}

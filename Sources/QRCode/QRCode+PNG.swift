import CPNG
import Foundation

extension QRCode {
    /// The symbol as an 8-bit greyscale PNG, `scale` pixels per module, written by libpng.
    public func png(scale: Int = 8, margin: Int = QRCode.standardMargin) throws(QRCodeError) -> Data {
        let side = (self.size + 2 * margin) * scale
        var pixels = [UInt8](repeating: 255, count: side * side)
        for row in 0..<self.size {
            for column in 0..<self.size where self[row, column] {
                for y in 0..<scale {
                    let start = ((row + margin) * scale + y) * side + (column + margin) * scale
                    pixels.replaceSubrange(start..<(start + scale), with: repeatElement(0, count: scale))
                }
            }
        }
        var image = png_image()
        image.version = png_uint_32(PNG_IMAGE_VERSION)
        image.width = png_uint_32(side)
        image.height = png_uint_32(side)
        image.format = png_uint_32(PNG_FORMAT_GRAY)
        defer { png_image_free(&image) }
        // The first call measures, the second writes.
        var length: png_alloc_size_t = 0
        guard png_image_write_to_memory(&image, nil, &length, 0, pixels, png_int_32(side), nil) != 0 else {
            throw QRCodeError("libpng could not write the image: \(Self.message(of: image))")
        }
        var data = Data(count: Int(length))
        let written = data.withUnsafeMutableBytes { buffer in
            png_image_write_to_memory(&image, buffer.baseAddress, &length, 0, pixels, png_int_32(side), nil)
        }
        guard written != 0 else { throw QRCodeError("libpng could not write the image: \(Self.message(of: image))") }
        data.count = Int(length)
        return data
    }

    private static func message(of image: png_image) -> String {
        withUnsafeBytes(of: image.message) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }
}

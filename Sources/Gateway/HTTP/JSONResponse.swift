import Foundation
import HTTPTypes
import HummingbirdCore
import NIOCore
import RPCCore

/// The gateway's HTTP responses: always JSON, never cached, HSTS, nothing naming the
/// server's software.
enum JSONResponse {
    /// HSTS: a year. The gateway serves only HTTPS, so a browser that saw it once never
    /// tries plain HTTP (the dashboard's cookies depend on it).
    static let strictTransportSecurity = "max-age=31536000"

    static func make(_ status: HTTPResponse.Status, bytes: some Sequence<UInt8>, extra: HTTPFields = [:]) -> Response {
        var headers: HTTPFields = [
            .contentType: "application/json; charset=utf-8",
            .strictTransportSecurity: Self.strictTransportSecurity,
            .cacheControl: "no-store",
            HTTPField.Name("X-Content-Type-Options")!: "nosniff",
        ]
        headers.append(contentsOf: extra)
        let buffer = ByteBuffer(bytes: bytes)
        if status == .noContent {
            // A 204 has neither a body nor a length (RFC 9110, 8.6).
            headers[.contentType] = nil
            return Response(status: status, headers: headers)
        }
        headers[.contentLength] = String(buffer.readableBytes)
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: buffer))
    }

    static func encode<T: Encodable>(_ status: HTTPResponse.Status, _ value: T) -> Response {
        let bytes = (try? RPCJSON.encodeSorted(value)) ?? Array("{}".utf8)
        return self.make(status, bytes: Data(bytes))
    }

    /// An error as a reply envelope (`{"id": …, "error": {…}}`) with the status that fits
    /// its code.
    static func error(_ error: RPCError, id: RequestID? = nil, extra: HTTPFields = [:]) -> Response {
        self.make(Self.status(for: error.code), bytes: ReplyEncoding.error(id: id, error), extra: extra)
    }

    /// The HTTP status of an error code (docs/protocol.md, "Gateway").
    static func status(for code: ErrorCode) -> HTTPResponse.Status {
        switch code {
        case .unauthorized, .deviceRevoked: .unauthorized
        case .forbidden: .forbidden
        case .notFound, .methodNotFound: .notFound
        case .frameTooLarge: .contentTooLarge
        case .rateLimited, .limitExceeded: .tooManyRequests
        case .unavailable: .serviceUnavailable
        case .timeout: .gatewayTimeout
        case .conflict: .conflict
        case .internal: .internalServerError
        case .invalidFrame, .invalidJSON, .invalidRequest, .invalidParams: .badRequest
        default: .badRequest
        }
    }
}

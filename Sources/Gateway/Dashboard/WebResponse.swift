import Foundation
import HTTPTypes
import HummingbirdCore
import NIOCore

/// The dashboard's HTTP responses: HTML, CSS, JavaScript, CSV and redirects, each with the
/// headers a page served to a browser needs (no caching of anything personal, a strict
/// Content-Security-Policy: only this origin's own scripts, styles and WebSocket).
enum WebResponse {
    static let contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        + "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

    static func baseHeaders(_ contentType: String, cache: String = "no-store") -> HTTPFields {
        [
            .contentType: contentType,
            .strictTransportSecurity: JSONResponse.strictTransportSecurity,
            .cacheControl: cache,
            HTTPField.Name("X-Content-Type-Options")!: "nosniff",
            HTTPField.Name("Content-Security-Policy")!: Self.contentSecurityPolicy,
            // same-origin, not no-referrer: with no-referrer a browser sends `Origin: null` on
            // form posts, and the origin check needs the real one.
            HTTPField.Name("Referrer-Policy")!: "same-origin",
            HTTPField.Name("X-Frame-Options")!: "DENY",
        ]
    }

    static func make(_ status: HTTPResponse.Status, contentType: String, body: String, extra: HTTPFields = [:], cache: String = "no-store") -> Response {
        var headers = Self.baseHeaders(contentType, cache: cache)
        headers.append(contentsOf: extra)
        let buffer = ByteBuffer(string: body)
        headers[.contentLength] = String(buffer.readableBytes)
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: buffer))
    }

    static func html(_ body: String, status: HTTPResponse.Status = .ok, extra: HTTPFields = [:]) -> Response {
        self.make(status, contentType: "text/html; charset=utf-8", body: body, extra: extra)
    }

    /// `303 See Other`: after a form, the browser GETs the page (so a reload never posts twice).
    static func redirect(_ location: String, extra: HTTPFields = [:]) -> Response {
        var headers = extra
        headers[.location] = location
        return self.make(.seeOther, contentType: "text/plain; charset=utf-8", body: "See \(location)\n", extra: headers)
    }

    /// Whether the client asked for a page rather than JSON (a browser's navigation).
    static func wantsHTML(_ headers: HTTPFields) -> Bool {
        (headers[.accept] ?? "").contains("text/html")
    }
}

/// `application/x-www-form-urlencoded` bodies and query strings.
enum FormData {
    static func parse(_ text: Substring) -> [String: String] {
        var values: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = decode(parts[0]) else { continue }
            let value = parts.count == 2 ? decode(parts[1]) ?? "" : ""
            if values[name] == nil { values[name] = value }
        }
        return values
    }

    private static func decode(_ text: Substring) -> String? {
        text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }

    static func encode(_ value: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }
}

/// Cookies: reading one, and the `Set-Cookie` values the dashboard sends. Every cookie is
/// `HttpOnly; Secure; SameSite=Strict`: no script reads it, it never travels in clear,
/// and no other site's page can make the browser send it.
enum Cookies {
    /// `__Host-`: a browser takes it only from this origin over HTTPS with `Path=/` and no
    /// `Domain`, so nothing on a sibling host or a plain-HTTP page can set or shadow it.
    static let session = "__Host-screentime_session"
    /// Its name before the prefix: still read, and moved to the prefixed name at the next
    /// page (so a browser signed in before keeps its session).
    static let formerSession = "screentime_session"

    /// The session's token, under its name or its former one.
    static func session(in headers: HTTPFields) -> String? {
        self.value(self.session, in: headers) ?? self.value(self.formerSession, in: headers)
    }
    /// The sign-in form's token (double-submit: the form and this cookie must agree).
    static let signIn = "screentime_signin"

    static func value(_ name: String, in headers: HTTPFields) -> String? {
        for header in headers[values: .cookie] {
            for pair in header.split(separator: ";") {
                let parts = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                if parts.count == 2, parts[0] == name, !parts[1].isEmpty { return parts[1] }
            }
        }
        return nil
    }

    static func set(_ name: String, _ value: String, path: String = "/", maxAge: Int) -> String {
        "\(name)=\(value); Path=\(path); Max-Age=\(maxAge); HttpOnly; Secure; SameSite=Strict"
    }

    static func clear(_ name: String, path: String = "/") -> String {
        "\(name)=; Path=\(path); Max-Age=0; HttpOnly; Secure; SameSite=Strict"
    }
}

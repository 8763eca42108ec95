import EdgeLimits
import Foundation
import GatewayAPI
import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore
import RPCCore

/// The HTTP side of the device API:
///
/// ```
/// POST /v1/rpc     one request envelope in, its reply out (unary methods)
/// GET  /v1/ws      the WebSocket (upgraded before it gets here; a plain GET is refused)
/// GET  /v1/info    server name, versions, the methods a device may call   (no auth)
/// GET  /healthz    whether each service answers                           (no auth)
/// ```
struct DeviceAPI: Sendable {
    let gateway: GatewayContext
    /// Every other path: the parent's web dashboard.
    let dashboard: Dashboard

    init(gateway: GatewayContext) {
        self.gateway = gateway
        self.dashboard = Dashboard(gateway: gateway)
    }

    func respond(to request: Request, writer: consuming ResponseWriter, channel: any Channel) async throws {
        let started = ContinuousClock.now
        let address = channel.remoteAddress?.ipAddress ?? "unknown"
        var request = request
        var outcome = Outcome()
        // The head is here: a form or a call's body must follow within the deadline (each
        // route that reads one disarms it then); any other request is whole now, and its
        // answer takes what it takes (a health check while a service is slow, say).
        let hasBody = request.method == .post
        RequestDeadline.on(channel) { hasBody ? $0.restart() : $0.disarm() }
        let response: Response
        switch (request.method, request.uri.path) {
        case (.post, "/v1/rpc"):
            response = await self.rpc(&request, channel: channel, address: address, outcome: &outcome)
        case (.get, "/v1/info"), (.head, "/v1/info"):
            response = self.limited(address) ?? JSONResponse.encode(.ok, self.gateway.info)
        case (.get, "/healthz"), (.head, "/healthz"):
            if let refused = self.limited(address) {
                response = refused
            } else {
                let health = await self.gateway.relay.health()
                let healthy = health.values.allSatisfy { $0 }
                response = JSONResponse.encode(healthy ? .ok : .serviceUnavailable, HealthReport(
                    status: healthy ? "ok" : "degraded", services: health.mapValues { $0 ? "ok" : "unavailable" }))
            }
        case (_, "/v1/rpc"), (_, "/v1/info"), (_, "/healthz"):
            response = JSONResponse.error(RPCError(.invalidRequest, "\(request.method.rawValue) is not allowed on \(request.uri.path)"),
                                          extra: [.allow: request.uri.path == "/v1/rpc" ? "POST" : "GET, HEAD"])
                .withStatus(.methodNotAllowed)
        case (_, "/v1/ws"):
            response = JSONResponse.error(RPCError(.invalidRequest, "/v1/ws is a WebSocket: send GET with Upgrade: websocket"))
        case (_, let path) where Dashboard.owns(path):
            // A form's body must come within the deadline; then the page is served without
            // one: a sign-in cut off after its enrollment code was used would leave the
            // browser to send it again, and be told the code is used.
            if request.method == .post { _ = try? await request.collectBody(upTo: Dashboard.maximumFormSize) }
            RequestDeadline.on(channel) { $0.disarm() }
            response = await self.dashboard.respond(to: &request, address: address)
        default:
            response = JSONResponse.error(RPCError(.notFound, "nothing here; the device API is at /v1/rpc, /v1/ws and /v1/info"))
        }
        try await writer.write(response: response.head, body: response.body)
        let route = Self.route(request.uri.path)
        self.gateway.metrics.responses(route, "\(response.status.code)").increment()
        self.gateway.metrics.responseDuration(route).record(ContinuousClock.now - started)
        // The response is out: the connection's next request must come in time too.
        RequestDeadline.on(channel) { $0.restart() }
        let level: Logger.Level = response.status.code >= 500 ? .warning : .info
        self.gateway.logger.log(level: level, "http request", metadata: [
            "remote_address": "\(address)", "http_method": "\(request.method.rawValue)", "path": "\(request.uri.path)",
            "http_status": "\(response.status.code)", "duration_ms": "\(Self.milliseconds(since: started))",
            "device_id": "\(outcome.deviceId ?? "")", "method": "\(outcome.method ?? "")",
        ])
    }

    /// What the log line says about a relayed request.
    struct Outcome {
        var deviceId: String?
        var method: String?
    }

    private func rpc(_ request: inout Request, channel: any Channel, address: String, outcome: inout Outcome) async -> Response {
        let body: ByteBuffer
        do {
            body = try await request.collectBody(upTo: self.gateway.configuration.limits.maximumBodySize)
        } catch {
            return JSONResponse.error(RPCError(.frameTooLarge, "the request body is over the gateway's limit of \(self.gateway.configuration.limits.maximumBodySize) bytes"),
                                      extra: [.connection: "close"])
        }
        RequestDeadline.on(channel) { $0.disarm() }
        let bytes = Array(body.readableBytesView)
        let parsed: DeviceRequest
        switch DeviceRequest.parse(bytes) {
        case .success(let request): parsed = request
        case .failure(let failure): return JSONResponse.error(failure.error, id: failure.id)
        }
        outcome.method = parsed.head.method
        let id = parsed.head.id
        // The credential: the Authorization header, else the envelope's own `auth`.
        let token = Self.bearerToken(request.headers) ?? parsed.head.auth?.token
        var identity: DeviceIdentity?
        if let token {
            do {
                identity = try await self.gateway.relay.authenticator.identify(token)
                outcome.deviceId = identity?.deviceId
            } catch {
                if error.code == .unauthorized, !self.gateway.rateLimiter.allow(address) {
                    self.gateway.metrics.refused("rate").increment()
                    return JSONResponse.error(Self.rateLimited, id: id)
                }
                return JSONResponse.error(ServiceRelay.presentable(error, service: "store"), id: id)
            }
        }
        do {
            let result = try await self.gateway.answer(parsed, identity: identity, address: address, on: channel.eventLoop)
            guard let id else { return JSONResponse.make(.noContent, bytes: []) }
            return JSONResponse.make(.ok, bytes: ReplyEncoding.resultBytes(id: id, encoded: result))
        } catch {
            return JSONResponse.error(error, id: id)
        }
    }

    /// A 429 when `address` has used up its unauthenticated requests.
    private func limited(_ address: String) -> Response? {
        guard !self.gateway.rateLimiter.allow(address) else { return nil }
        self.gateway.metrics.refused("rate").increment()
        return JSONResponse.error(Self.rateLimited, extra: [.retryAfter: "60"])
    }

    /// The metrics' `route` label: one of a few names, never the path itself.
    static func route(_ path: String) -> String {
        switch path {
        case "/v1/rpc": "rpc"
        case "/v1/info": "info"
        case "/healthz": "healthz"
        case "/v1/ws": "websocket"
        case _ where Dashboard.owns(path): "dashboard"
        default: "other"
        }
    }

    static let rateLimited = RPCError(.rateLimited, "too many requests without a device credential from this address; wait a minute")

    /// `Authorization: Bearer <token>`.
    static func bearerToken(_ headers: HTTPFields) -> String? {
        guard let value = headers[.authorization] else { return nil }
        let parts = value.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = parts[1].trimmingCharacters(in: .whitespaces)
        return token.isEmpty ? nil : token
    }

    /// The dashboard's session cookie: `__Host-screentime_session=<token>`, taken only
    /// from a page of this origin (a WebSocket is not bound by the same-origin policy, so
    /// another site's page must not open one with the browser's cookie).
    ///
    /// A page's origin is always `http(s)://…` (or `null`); WebSocket client libraries send
    /// their own (`wss://host`, swift-websocket's), which no page can forge: those are taken.
    static func sessionCookie(_ headers: HTTPFields, origins: Origins) -> String? {
        if let origin = headers[HTTPField.Name("Origin")!], !(origin.hasPrefix("wss://") || origin.hasPrefix("ws://")) {
            guard Dashboard.sameOrigin(headers, origins: origins) else { return nil }
        }
        return Cookies.session(in: headers)
    }

    static func milliseconds(since start: ContinuousClock.Instant) -> String {
        let elapsed = ContinuousClock.now - start
        let ms = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        return String(format: "%.2f", ms)
    }
}

extension Response {
    func withStatus(_ status: HTTPResponse.Status) -> Response {
        var copy = self
        copy.status = status
        return copy
    }
}

import GatewayAPI
import NIOCore
import RPCCore

/// Who is on the socket: the credential at the upgrade or with `gateway.authenticate`,
/// checked again for each request (in the gateway's credential table) and by its credential
/// watch; a socket whose credential is no longer valid is cut off.
extension DeviceSocket {
    /// The device of `token`, or nil after telling the device why not (and cutting the
    /// socket off when the credential is not valid).
    /// `refuseLater`: the upgrade's credential; a refusal waits for the device's first message.
    func authenticate(_ token: String, requestID: RequestID?, fresh: Bool = false, refuseLater: Bool = false) async -> DeviceIdentity? {
        do {
            let identity = try await self.gateway.relay.authenticator.identify(token, fresh: fresh)
            // Watched from its first authentication on, unless the socket ended meanwhile
            // (decided under the lock `ended()` takes, so no ended socket stays watched).
            let open = self.state.withLock { state -> Bool in
                guard !state.ended else { return false }
                if state.identity == nil { self.watchCredential(identity) }
                state.identity = identity
                return true
            }
            return open ? identity : nil
        } catch {
            if error.code == .unauthorized || error.code == .deviceRevoked {
                // A wrong token costs its address; a revoked one is known, not a guess.
                if error.code == .unauthorized { _ = self.gateway.rateLimiter.allow(self.address) }
                if refuseLater { return self.refuseLater(error) }
                self.cutOff(requestID, error)
            } else {
                await self.send(ReplyEncoding.error(id: requestID, ServiceRelay.presentable(error, service: "store")))
            }
            return nil
        }
    }

    /// `gateway.authenticate`: the credential for the rest of the socket.
    func authenticateMessage(_ id: RequestID?, _ given: AuthenticateParams) async {
        guard self.identity == nil else {
            return await self.send(ReplyEncoding.error(id: id, RPCError(.invalidRequest, "this connection is authenticated already")))
        }
        guard self.gateway.rateLimiter.allow(self.address) else {
            return await self.send(ReplyEncoding.error(id: id, DeviceAPI.rateLimited))
        }
        guard let identity = await self.authenticate(given.token, requestID: id) else { return }
        if let id, let reply = try? ReplyEncoding.result(id: id, AuthenticateResult(deviceId: identity.deviceId, family: identity.family, role: identity.caller)) {
            await self.send(reply)
        }
    }

    /// The upgrade's credential was refused: the socket takes messages, and the first one
    /// gets the refusal and cuts it off; a device that says nothing is cut off at
    /// `--auth-timeout`.
    private func refuseLater(_ error: RPCError) -> DeviceIdentity? {
        self.state.withLock {
            $0.refusal = error
            $0.reading = true
        }
        self.channel.eventLoop.scheduleTask(in: TimeAmount(self.gateway.configuration.limits.authenticationTimeout)) {
            guard !self.isClosing else { return }
            self.cutOff(nil, error)
        }
        return nil
    }

    /// A socket opened without a credential has `--auth-timeout` to give one
    /// (`gateway.authenticate`); then it is closed with 1008. A request it sent in time and
    /// still in flight at the deadline (an enrollment, whose answer is the credential) moves
    /// the deadline once, by as much again: closing then would lose the answer to a request
    /// the services may have carried out (an enrollment code used, its credential unsent).
    func requireCredential(extended: Bool = false) {
        let timeout = self.gateway.configuration.limits.authenticationTimeout
        self.channel.eventLoop.scheduleTask(in: TimeAmount(timeout)) {
            guard self.identity == nil, !self.state.withLock({ $0.closing }) else { return }
            let inFlight = self.state.withLock { $0.requests.count + $0.anonymous.count }
            if inFlight > 0, !extended {
                self.logger.info("no credential in time, but a request is in flight: waiting for it", metadata: [
                    "remote_address": "\(self.address)", "auth_timeout_s": "\(timeout.seconds)", "in_flight": "\(inFlight)",
                ])
                self.requireCredential(extended: true)
                return
            }
            self.logger.info("websocket closed: no credential in time", metadata: [
                "remote_address": "\(self.address)", "auth_timeout_s": "\(timeout.seconds)", "in_flight": "\(inFlight)",
            ])
            self.reply(nil, RPCError(.unauthorized, "no credential was given within \(timeout.seconds) s; authenticate with gateway.authenticate right after opening"))
            // The plain reason promises the client that no request of this socket was under
            // way and none after it will be read: it may send them again on a new socket.
            self.close(.policyViolation, reason: inFlight == 0 ? GatewayCloseReason.noCredential : GatewayCloseReason.noCredentialCutOff)
        }
    }

    /// From the first authentication on, the gateway's credential watch cuts this socket
    /// off when its device's credential is revoked or replaced.
    private func watchCredential(_ identity: DeviceIdentity) {
        self.gateway.credentialWatch.watch(ObjectIdentifier(self), identity) { error in
            self.cutOff(nil, error)
        }
    }

    /// Tells the device why, then closes the socket (policy violation); its requests in
    /// flight are cancelled.
    func cutOff(_ id: RequestID?, _ error: RPCError) {
        let requests = self.state.withLock { state -> [InFlight] in
            state.closing = true
            if state.closeReason == nil { state.closeReason = "cut off: \(error.code)" }
            return Array(state.requests.values) + state.anonymous.values.map(InFlight.task)
        }
        for request in requests { request.cancel() }
        // The device named even when it never authenticated here (a revoked token at the
        // upgrade): the store says whose credential it was.
        let deviceId = self.identity?.deviceId ?? error.data?["deviceId"]?.stringValue ?? ""
        self.logger.notice("websocket cut off", metadata: [
            "remote_address": "\(self.address)", "device_id": "\(deviceId)", "reason": "\(error.code)",
        ])
        self.reply(id, error)
        self.close(.policyViolation, reason: error.code == .deviceRevoked ? GatewayCloseReason.deviceRevoked : GatewayCloseReason.credentialNotValid)
    }
}

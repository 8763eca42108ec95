import Logging
import RPCClient
import RPCCore

/// A relayed stream (`push.listen`): its replies go from the service's connection to the
/// device on the socket's event loop (``StreamForwarder``); a task waits for its end.
extension DeviceSocket {
    func stream(_ method: DeviceMethod, id: RequestID, params: JSONValue?, identity: DeviceIdentity?) async {
        guard let connections = self.gateway.relay.streams[method.service] else {
            return await self.send(ReplyEncoding.error(id: id, RPCError(.internal, "the server could not handle this request; its administrator will find the details in its journal")))
        }
        let lease = connections.acquire(on: self.channel.eventLoop)
        let forwarder = StreamForwarder(writer: self.writer, id: id, limit: self.gateway.configuration.limits.maximumQueuedReplies, service: method.service)
        let started = ContinuousClock.now
        var metadata: Logger.Metadata = ["remote_address": "\(self.address)", "device_id": "\(identity?.deviceId ?? "")", "method": "\(method.name)"]
        self.logger.debug("stream opened", metadata: metadata)
        let relayed: RelayedStream
        do throws(RPCError) {
            relayed = try await lease.client.relayStream(method.name, params: params, auth: self.gateway.relay.forwardedAuth(method, identity)) { event in
                forwarder.deliver(event)
            }
        } catch {
            await connections.release(lease)
            await self.send(ReplyEncoding.error(id: id, ServiceRelay.presentable(error, service: method.service)))
            return
        }
        let outcome = await withTaskCancellationHandler {
            await forwarder.ended()
        } onCancel: {
            forwarder.cancel()
        }
        switch outcome {
        case .ended:
            break
        case .overflowed:
            relayed.cancel()
        case .cancelled:
            // rpc.cancel, or the socket is closing: the service is told to stop.
            relayed.cancel()
            await self.send(ReplyEncoding.error(id: id, RPCError(.cancelled, "the request was cancelled")))
        }
        await connections.release(lease)
        metadata["duration_ms"] = "\(DeviceAPI.milliseconds(since: started))"
        metadata["outcome"] = "\(outcome)"
        self.logger.debug("stream ended", metadata: metadata)
    }
}

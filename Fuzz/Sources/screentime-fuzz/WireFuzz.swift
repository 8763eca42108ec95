import AggregatorAPI
import Foundation
import NIOCore
import NIOEmbedded
import PairingAPI
import PushAPI
import RPCCore
import StoreAPI

/// One fuzz input is the bytes a client sends on a connection. They go through what a
/// service does with them: the frame decoder, the request parser, then the named method's
/// params decoder (every method of every service, from the declared lists), and the error
/// reply for whatever is refused. Besides crashes (the sanitizers, Swift's own traps), it
/// checks what must hold for every input:
///
/// - the frames are the same whether the bytes arrive at once or in small pieces;
/// - every error reply the server would send is a reply a client can read, with its id;
/// - params a method accepts, written back by the client's encoder, are accepted again.
enum WireFuzz {
    /// Every declared method of every service, and the built-ins every service answers.
    static let methods: [String: any DeclaredMethod] = {
        var methods: [String: any DeclaredMethod] = [:]
        let builtins: [any DeclaredMethod] = [Builtin.ping, Builtin.describe, Builtin.cancel]
        let lists = [StoreMethods.list, PairingMethods.list, PushMethods.list, AggregatorMethods.list]
        for method in builtins + lists.flatMap(\.methods) { methods[method.name] = method }
        return methods
    }()

    static func run(_ input: UnsafeBufferPointer<UInt8>) {
        let bytes = Array(input)
        let whole = self.frames(of: bytes, pieces: [bytes.count])
        // Read boundaries from the input itself (1 to 64 bytes a read), so a mutation also
        // moves them: through length prefixes, between frames, inside payloads.
        var pieces: [Int] = []
        var covered = 0
        while covered < bytes.count {
            pieces.append(1 + Int(bytes[pieces.count % bytes.count] % 64))
            covered += pieces.last!
        }
        let pieced = self.frames(of: bytes, pieces: pieces)
        check(whole.frames == pieced.frames && whole.failed == pieced.failed,
              "the frames depend on how the bytes arrive: \(whole) at once, \(pieced) in reads of \(pieces)")
        for frame in whole.frames {
            self.serve(frame)
            // A client reads replies with the same framing and JSON: a reply it cannot
            // read must be an error, never a crash.
            _ = try? ReplyHead.parse(Data(frame))
        }
    }

    /// Frames as a service's connection reads them, the bytes delivered in `pieces`.
    static func frames(of bytes: [UInt8], pieces: [Int]) -> (frames: [[UInt8]], failed: Bool) {
        let channel = EmbeddedChannel()
        var frames: [[UInt8]] = []
        var failed = false
        do {
            try channel.pipeline.syncOperations.addFrameCodec(maximumFrameSize: defaultMaximumFrameSize)
            var start = 0
            for size in pieces where start < bytes.count {
                let end = min(bytes.count, start + size)
                try channel.writeInbound(ByteBuffer(bytes: bytes[start..<end]))
                start = end
            }
        } catch is FrameTooLargeError {
            failed = true
        } catch {
            check(false, "the frame decoder failed with \(error), not FrameTooLargeError")
        }
        while let frame = try? channel.readInbound(as: ByteBuffer.self) { frames.append(Array(frame.readableBytesView)) }
        _ = try? channel.finish()
        return (frames, failed)
    }

    /// What a service does with one frame, up to calling the handler.
    static func serve(_ frame: [UInt8]) {
        let head: RequestHead
        let params: RequestParams?
        switch RequestHead.parseRequestLeavingParams(bytes: frame) {
        case .failure(let failure):
            self.checkErrorReply(id: failure.id, failure.error)
            return
        case .success(let parsed):
            (head, params) = parsed
        }
        guard let method = self.methods[head.method] else {
            self.checkErrorReply(id: head.id, RPCError(
                .methodNotFound, "this service has no method \"\(head.method)\"", data: ["method": .string(head.method)]))
            return
        }
        let decoded: any Codable & Sendable
        do {
            decoded = try method.decodeParams(params)
        } catch {
            // (A refusal is always the parsed path's: when the hand reader gives up on the
            // bytes, the params are decoded parsed.)
            self.checkErrorReply(id: head.id, error)
            return
        }
        self.checkSameValue(decoded, params: params, method: method)
        self.checkRoundTrip(decoded, head: head, method: method)
    }

    /// Params read from the request's bytes (a hand reader over the text) decode to what
    /// the parsed params decode to (the hand reader over the parsed value, or `Decodable`):
    /// the same value, written as the same JSON.
    static func checkSameValue(_ decoded: any Codable & Sendable, params: RequestParams?, method: any DeclaredMethod) {
        do {
            let parsed = try method.decodeParams(params?.value)
            check(try RPCJSON.encodeSorted(decoded) == RPCJSON.encodeSorted(parsed),
                  "\(method.name): params read from the bytes differ from the parsed params' \(String(decoding: params.map { Array($0.bytes[$0.range]) } ?? [], as: UTF8.self))")
        } catch {
            check(false, "\(method.name): params read from the bytes were refused once parsed (\(error))")
        }
    }

    /// The error reply is readable, carries the request's id and the error's code.
    static func checkErrorReply(id: RequestID?, _ error: RPCError) {
        let payload = ReplyEncoding.error(id: id, error)
        guard let reply = try? ReplyHead.parse(payload) else {
            return check(false, "unreadable error reply: \(String(decoding: payload, as: UTF8.self))")
        }
        check(reply.id == id && reply.error?.code == error.code,
              "the error reply lost its id or code: \(String(decoding: payload, as: UTF8.self))")
    }

    /// Params the server accepted, sent by a client as it encodes them, are accepted again.
    static func checkRoundTrip(_ params: any Codable & Sendable, head: RequestHead, method: any DeclaredMethod) {
        let request: Data
        do {
            request = try ReplyEncoding.request(id: head.id, method: head.method, params: params, auth: head.auth)
        } catch {
            return check(false, "\(head.method): accepted params could not be encoded again: \(error)")
        }
        switch RequestHead.parseRequest(request) {
        case .failure(let failure):
            check(false, "\(head.method): re-encoded request unreadable (\(failure.error)): \(String(decoding: request, as: UTF8.self))")
        case .success(let (again, params)):
            check(again == head, "\(head.method): re-encoded head differs: \(again) vs \(head)")
            do {
                _ = try method.decodeParams(params)
            } catch {
                check(false, "\(head.method): params accepted once are refused after a round trip (\(error)): \(String(decoding: request, as: UTF8.self))")
            }
        }
    }
}

/// A broken invariant is a crash, which libFuzzer saves as a reproducer.
func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition {
        FileHandle.standardError.write(Data("screentime-fuzz: \(message())\n".utf8))
        abort()
    }
}

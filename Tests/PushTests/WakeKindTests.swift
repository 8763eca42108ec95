import Foundation
import Logging
@testable import PushEngine
import Testing
import TestSupport
import RPCCore

/// A device's pending wake, read from push's database: what each notification asked for.
@Suite("Push: the kind of a wake")
struct WakeKindTests {
    @Test("a notification queued while an alert wake is being sent is woken with its own kind: a silent one gets a background wake, never a second visible alert; one that asks for an alert keeps it")
    func kindOfWhatCameWhileSending() async throws {
        let directory = TemporaryDirectory()
        let database = try PushDatabase(path: directory.file("push.sqlite"), logger: Logger(label: "test"))
        let now = Date()
        _ = try await database.registerWake(family: "smith", deviceId: "dad-phone", handle: "v2.x", relay: "https://relay.example.org", now: now)
        let queue = { (seq: Int64, kind: WakeKind) async throws in
            let item = PushDatabase.Queued(family: "smith", deviceId: "dad-phone", seq: seq, collapseKey: nil, expiresAt: now + 3600,
                                           outgoing: Outgoing(seq: seq, expiresAt: now + 3600, json: EncodedJSON("{}")), body: 0, posted: false,
                                           wake: PushDatabase.Wake(kind: kind, after: .zero))
            try await database.pool.write { db in try PushDatabase.scheduleWakes([item], db) }
        }
        // Times are read after each step: a wake is due from when it was queued (this
        // process's clock), and a loaded machine may take seconds between steps.
        try await queue(1, .alert)
        let first = Date() + 1
        let sending = try #require(try await database.dueWakes(now: first, limit: 10).first)
        #expect(sending.seq == 1 && sending.kind == .alert)
        // While it is being sent, a notification that asks for a silent wake comes.
        try await queue(2, .background)
        try await database.record([.sent(sending, at: first)])
        // Past the 30 s a woken device has to fetch: the next wake is the silent one's.
        let second = Date() + 60
        let next = try #require(try await database.dueWakes(now: second, limit: 10).first)
        #expect(next.seq == 2 && next.kind == .background)
        // One that asks for an alert while that is sent keeps its alert.
        try await queue(3, .alert)
        try await database.record([.sent(next, at: second)])
        let alert = try #require(try await database.dueWakes(now: Date() + 120, limit: 10).first)
        #expect(alert.seq == 3 && alert.kind == .alert)
    }
}

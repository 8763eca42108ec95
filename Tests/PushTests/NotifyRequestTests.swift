import Foundation
import Logging
import PushAPI
@testable import PushEngine
import Testing
import TestSupport

@Suite("Push: a notification's request id is kept a week")
struct NotifyRequestTests {
    @Test("push.notify's answer is found by its request id until a week after it was sent, then forgotten with the expired notifications")
    func keptAWeek() async throws {
        let directory = TemporaryDirectory()
        let database = try PushDatabase(path: directory.file("push.sqlite"), logger: Logger(label: "test"))
        let sent = Date(timeIntervalSince1970: 1_796_000_000)
        let notification = PushNotification(seq: 0, family: "smith", reason: .message, alert: Alert(title: "The week of 23 Nov to 29 Nov"),
                                            createdAt: sent, expiresAt: sent.addingTimeInterval(86_400))
        let request = PushDatabase.NotifyRequest(family: "smith", id: "notify-1f2e", at: sent)
        let queued = try await database.enqueue([PushDatabase.Draft(family: "smith", deviceId: "mum-phone", notification: notification, group: 1)],
                                                request: request)
        let answer = NotifyResult(queued: queued.map { QueuedNotification(deviceId: $0.deviceId, seq: $0.seq) })
        #expect(try await database.notifyAnswer(family: "smith", requestId: "notify-1f2e") == answer)
        // Another family's id of the same text is another request.
        #expect(try await database.notifyAnswer(family: "jones", requestId: "notify-1f2e") == nil)

        _ = try await database.purgeExpired(now: sent.addingTimeInterval(6 * 86_400))
        #expect(try await database.notifyAnswer(family: "smith", requestId: "notify-1f2e") == answer, "six days on: still a retry")
        _ = try await database.purgeExpired(now: sent.addingTimeInterval(7 * 86_400 + 1))
        #expect(try await database.notifyAnswer(family: "smith", requestId: "notify-1f2e") == nil, "past a week: forgotten")
    }
}

import APNsStandIn
import Foundation
import TestSupport

/// The APNs stand-in for a test: its files in a temporary directory, and its pushes as
/// arrivals a test waits for.
public final class TestAPNs: Sendable {
    public let standIn: APNsStandIn
    public let directory = TemporaryDirectory()
    private let arrivals = Arrivals<APNsStandIn.Received>()

    public init() async throws {
        let arrivals = self.arrivals
        self.standIn = try await APNsStandIn(directory: self.directory.path) { arrivals.append($0) }
    }

    public var keyId: String { self.standIn.keyId }
    public var teamId: String { self.standIn.teamId }
    public var topic: String { self.standIn.topic }
    public var p8: String { self.standIn.p8 }
    public var url: String { self.standIn.url }
    /// The CA of the stand-in's certificate.
    public var certificateFile: String { self.standIn.certificateFile }
    public var pushes: [APNsStandIn.Received] { self.standIn.pushes }

    /// The next answers for `token`, in order (then 200).
    public func answer(_ token: String, _ answers: [(status: Int, reason: String)]) { self.standIn.answer(token, answers) }

    /// Waits until `count` pushes were taken in all; returns them all.
    @discardableResult
    public func wait(for count: Int, timeout: Duration = .seconds(10)) async throws -> [APNsStandIn.Received] {
        try await self.arrivals.wait(for: count, timeout: timeout, "pushes") { $0.map { "\($0.headers["apns-push-type"] ?? "?") to \($0.token.prefix(8))…" }.description }
    }

    public func stop() { self.standIn.stop() }
}

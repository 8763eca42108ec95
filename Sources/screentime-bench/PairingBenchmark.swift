import ArgumentParser
import Foundation
import PairingAPI
import RPCClient
import RPCCore

/// Invite, accept and confirm, one child device after another, through a real store and a
/// real pairing service; each call timed as its client sees it (socket round trip included,
/// so an upper bound on the server's own time).
struct PairingBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pairing",
        abstract: "Benchmarks screentime-pairingd: invite, accept and confirm latency, and whole pairing flows."
    )

    @Option(help: "Child devices paired (one invite, accept and confirm each).")
    var devices: Int = 500

    @OptionGroup var common: CommonOptions

    func validate() throws {
        guard self.devices >= 10 else { throw ValidationError("--devices must be at least 10") }
    }

    func run() async throws {
        let devices = self.common.quick ? 40 : self.devices
        let services = try BenchServices(self.common, benchmark: "pairing")
        defer { services.stop() }
        let store = try services.launch("screentime-stored")
        let pairing = try services.launch("screentime-pairingd", ["--server-address", "bench.local"])
        let socket = services.socket("pairing")
        let admin = RPCClient(configuration: ClientConfiguration(socketPath: socket, connectTimeout: .seconds(10)))

        var bootstrap = Samples()
        let started = ContinuousClock.now
        let code = try await admin.call(PairingMethods.createFamily, NewFamilyParams(family: "bench", displayName: "Bench", timeZone: "Europe/Paris"))
        let credential = try await admin.call(PairingMethods.enrollParent, EnrollParentParams(
            family: "bench", code: code.code, deviceId: "parent-phone", deviceName: "Parent's phone"))
        bootstrap.add(ContinuousClock.now - started)
        let parent = RPCClient(configuration: ClientConfiguration(socketPath: socket, auth: Auth(token: credential.token)))

        // Children of 1 to 4 devices each, as families have them; the first tenth warms up.
        var invite = Samples(), accept = Samples(), confirm = Samples(), flow = Samples()
        try await services.phase("pairing \(devices) devices", [pairing, store]) {
            for index in 0..<devices {
                let child = "child-\(index / 4)"
                let flowStarted = ContinuousClock.now
                let invitation = try await parent.call(PairingMethods.createInvitation, CreateInvitationParams(childId: child))
                let invited = ContinuousClock.now
                let accepted = try await admin.call(PairingMethods.acceptInvitation, AcceptInvitationParams(
                    family: "bench", invitationId: invitation.invitationId, secret: invitation.secret,
                    deviceId: "device-\(index)", deviceName: "Device \(index)"))
                let accepting = ContinuousClock.now
                _ = try await parent.call(PairingMethods.confirm, InvitationParams(invitationId: invitation.invitationId))
                let confirmed = ContinuousClock.now
                guard accepted.credential.deviceId == "device-\(index)" else { throw BenchError("accepted the wrong device: \(accepted.credential.deviceId)") }
                guard index >= devices / 10 else { continue }
                invite.add(invited - flowStarted)
                accept.add(accepting - invited)
                confirm.add(confirmed - accepting)
                flow.add(confirmed - flowStarted)
                if (index + 1) % max(1, devices / 5) == 0 { say("  paired \(index + 1) of \(devices) devices") }
            }
        }
        let listed = ContinuousClock.now
        let list = try await parent.call(PairingMethods.listDevices, Empty())
        let listTime = ContinuousClock.now - listed
        guard list.devices.count == devices + 1 else { throw BenchError("listDevices shows \(list.devices.count) devices, expected \(devices + 1)") }

        let target = 20_000.0  // µs: each call under 20 ms p99
        var figures: [Figure] = []
        for (name, samples) in [("pairing.createInvitation", invite), ("pairing.acceptInvitation", accept), ("pairing.confirm", confirm)] {
            figures.append(Figure(name: "\(name), p50", value: samples.p50, unit: "µs"))
            figures.append(Figure(name: "\(name), p99", value: samples.p99, unit: "µs", target: "< 20 ms", met: samples.p99 < target))
        }
        figures.append(Figure(name: "whole pairing flow (3 calls), p50", value: flow.p50 / 1000, unit: "ms"))
        figures.append(Figure(name: "whole pairing flow (3 calls), p99", value: flow.p99 / 1000, unit: "ms", target: "< 30 s with people", met: flow.p99 < 30_000_000))
        figures.append(Figure(name: "bootstrap (createFamily + enrollParent)", value: bootstrap.p50 / 1000, unit: "ms"))
        figures.append(Figure(name: "pairing.listDevices of \(devices + 1) devices", value: listTime.seconds * 1000, unit: "ms"))
        Report.print("screentime-pairingd (\(devices) child devices\(self.common.quick ? ", quick mode" : ""))", figures)
        if let json = self.common.json { try Report.writeJSON(figures, to: json) }
        await parent.close()
        await admin.close()
    }
}

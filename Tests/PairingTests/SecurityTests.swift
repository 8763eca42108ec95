import Foundation
import PairingAPI
import RPCClient
import RPCCore
import StoreAPI
import Testing
import StackSupport
import TestSupport

@Suite("Pairing security: secrets, expiry, single use, lockout, rate limits, short codes")
struct SecurityTests {
    @Test("secrets never start with a dash, so they can follow an option on a command line (one in 64 did)")
    func secretsNeverStartWithADash() async throws {
        try await PairingHarness.inProcess { harness in
            let family = try await Bootstrapped.make(harness)
            // 300 secrets: the old generator gave none with a leading dash in 0.9% of runs.
            var secrets: [String] = [family.parentCredential.token]
            for index in 0..<300 {
                secrets.append(try await family.parent.call(PairingMethods.createInvitation, CreateInvitationParams(childId: "child\(index % 10)")).secret)
            }
            #expect(secrets.allSatisfy { !$0.hasPrefix("-") }, "\(secrets.filter { $0.hasPrefix("-") })")
            #expect(Set(secrets).count == secrets.count)
        }
    }

    @Test("unknown families, unknown ids and wrong secrets all get the same invitation_invalid")
    func sameErrorForEverything() async throws {
        try await PairingHarness.inProcess { harness in
            let family = try await Bootstrapped.make(harness)
            let invitation = try await family.parent.call(PairingMethods.createInvitation, CreateInvitationParams(childId: "emma"))
            let anyone = harness.pairingClient()
            var messages = Set<String>()
            for (familyName, id, secret) in [("smith", invitation.invitationId, "wrong"), ("smith", "0123456789abcdef", invitation.secret),
                                             ("jones", invitation.invitationId, invitation.secret), ("smith", "not an id!", invitation.secret)] {
                let error = await expectError(.invitationInvalid) {
                    _ = try await anyone.call(PairingMethods.acceptInvitation, AcceptInvitationParams(
                        family: familyName, invitationId: id, secret: secret, deviceId: "x", deviceName: "X"))
                }
                messages.insert(error?.message ?? "")
            }
            #expect(messages.count == 1)
        }
    }

    @Test("the fifth wrong secret locks the invitation: the right secret no longer works")
    func lockout() async throws {
        let harness = try await PairingHarness.start()
        defer { harness.stopNow() }
        let family = try await Bootstrapped.make(harness)
        let invitation = try await family.parent.call(PairingMethods.createInvitation, CreateInvitationParams(childId: "emma"))
        let anyone = harness.pairingClient()
        for attempt in 1...5 {
            await expectError(.invitationInvalid) {
                _ = try await anyone.call(PairingMethods.acceptInvitation, AcceptInvitationParams(
                    family: "smith", invitationId: invitation.invitationId, secret: "guess-\(attempt)", deviceId: "x", deviceName: "X"))
            }
        }
        await expectError(.invitationInvalid) {
            _ = try await anyone.call(PairingMethods.acceptInvitation, AcceptInvitationParams(
                family: "smith", invitationId: invitation.invitationId, secret: invitation.secret, deviceId: "emma-ipad", deviceName: "iPad"))
        }
        #expect(try await family.parent.call(PairingMethods.invitationStatus, InvitationParams(invitationId: invitation.invitationId)).status == .locked)
        #expect(harness.pairing.log.contains("wrong pairing secret"))
    }

    @Test("an invitation is single use: a second device gets invitation_invalid, and the codes differ by device")
    func singleUse() async throws {
        try await PairingHarness.inProcess { harness in
            let family = try await Bootstrapped.make(harness)
            let child = try await family.pairChild(harness, confirm: false)
            await expectError(.invitationInvalid) {
                _ = try await harness.pairingClient().call(PairingMethods.acceptInvitation, AcceptInvitationParams(
                    family: "smith", invitationId: child.invitation.invitationId, secret: child.invitation.secret, deviceId: "intruder", deviceName: "?"))
            }
            // What an intruder's screen would show is not what the parent's shows.
            let parents = ShortCode(secret: child.invitation.secret, invitationId: child.invitation.invitationId, parentDeviceId: "mum-phone", childDeviceId: "emma-ipad")
            let intruders = ShortCode(secret: child.invitation.secret, invitationId: child.invitation.invitationId, parentDeviceId: "mum-phone", childDeviceId: "intruder")
            #expect(parents == child.accepted.shortCode && intruders != parents)
            #expect(parents.emoji.count == 7 && parents.digits.count == 3 && parents.digits.allSatisfy { (1000...9191).contains($0) })
            #expect(Set(ShortCode.table.map(\.emoji)).count == 64 && Set(ShortCode.table.map(\.name)).count == 64)
        }
    }

    @Test("two devices racing for one invitation: exactly one wins")
    func race() async throws {
        try await PairingHarness.inProcess { harness in
            let family = try await Bootstrapped.make(harness)
            let invitation = try await family.parent.call(PairingMethods.createInvitation, CreateInvitationParams(childId: "emma"))
            let outcomes = await withTaskGroup(of: Bool.self) { group in
                for device in 0..<6 {
                    group.addTask {
                        (try? await harness.pairingClient().call(PairingMethods.acceptInvitation, AcceptInvitationParams(
                            family: "smith", invitationId: invitation.invitationId, secret: invitation.secret, deviceId: "d\(device)", deviceName: "D"))) != nil
                    }
                }
                return await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(outcomes.filter { $0 }.count == 1)
        }
    }

    @Test("a confirm and a reject racing (two parents): exactly one wins, and the credential agrees with it")
    func confirmRejectRace() async throws {
        try await PairingHarness.inProcess { harness in
            let family = try await Bootstrapped.make(harness)
            for round in 0..<4 {
                let child = try await family.pairChild(harness, child: "c\(round)", device: "d\(round)", confirm: false)
                let id = InvitationParams(invitationId: child.invitation.invitationId)
                async let confirmed = try? family.parent.call(PairingMethods.confirm, id)
                async let rejected = try? harness.pairingClient(token: family.parentCredential.token).call(PairingMethods.reject, id)
                let (confirm, reject) = await (confirmed, rejected)
                #expect((confirm != nil) != (reject != nil), "round \(round): exactly one decision wins")
                let status = try await family.parent.call(PairingMethods.invitationStatus, id).status
                let device = try await family.parent.call(PairingMethods.listDevices, Empty()).devices.first { $0.deviceId == "d\(round)" }
                #expect(status == (confirm != nil ? .confirmed : .rejected))
                #expect(device?.status == (confirm != nil ? .active : .revoked), "round \(round): the credential follows the decision")
            }
        }
    }

    @Test("an expired invitation cannot be accepted, and says so to its parent")
    func expiry() async throws {
        try await PairingHarness.inProcess { harness in
            let family = try await Bootstrapped.make(harness)
            let invitation = try await family.parent.call(PairingMethods.createInvitation, CreateInvitationParams(childId: "emma", expiresInSeconds: 1))
            try await Task.sleep(for: .milliseconds(1500))
            await expectError(.invitationInvalid) {
                _ = try await harness.pairingClient().call(PairingMethods.acceptInvitation, AcceptInvitationParams(
                    family: "smith", invitationId: invitation.invitationId, secret: invitation.secret, deviceId: "emma-ipad", deviceName: "iPad"))
            }
            #expect(try await family.parent.call(PairingMethods.invitationStatus, InvitationParams(invitationId: invitation.invitationId)).status == .expired)
        }
    }

    @Test("wrong attempts are rate limited per family; other families are not held up")
    func rateLimit() async throws {
        try await PairingHarness.inProcess(configure: { $0.failuresPerFamily = 3 }) { harness in
            let smith = try await Bootstrapped.make(harness)
            let jones = try await Bootstrapped.make(harness, family: "jones", parentDevice: "jones-phone")
            let invitation = try await smith.parent.call(PairingMethods.createInvitation, CreateInvitationParams(childId: "emma"))
            let anyone = harness.pairingClient()
            for _ in 1...3 {
                await expectError(.invitationInvalid) {
                    _ = try await anyone.call(PairingMethods.acceptInvitation, AcceptInvitationParams(
                        family: "smith", invitationId: "0123456789abcdef", secret: "guess", deviceId: "x", deviceName: "X"))
                }
            }
            let limited = await expectError(.limitExceeded) {
                _ = try await anyone.call(PairingMethods.acceptInvitation, AcceptInvitationParams(
                    family: "smith", invitationId: invitation.invitationId, secret: invitation.secret, deviceId: "emma-ipad", deviceName: "iPad"))
            }
            #expect(limited?.message.contains("try again in") == true)
            _ = try await jones.pairChild(harness, child: "ann", device: "ann-ipad")
        }
    }

    @Test("no limit over all families: 500 wrong guesses at other families (real and made up) leave a family's pairing open, at once")
    func noLockoutOfEveryone() async throws {
        try await PairingHarness.inProcess { harness in
            let anyone = harness.pairingClient()
            let others = ["a", "b", "c", "d"]
            for family in others { _ = try await Bootstrapped.make(harness, family: family, parentDevice: "\(family)-phone") }
            let untouched = try await Bootstrapped.make(harness, family: "e", parentDevice: "e-phone")
            let invitation = try await untouched.parent.call(PairingMethods.createInvitation, CreateInvitationParams(childId: "emma"))
            var codes: [ErrorCode: Int] = [:]
            for guess in 0..<500 {
                // Families that exist, each soon over its own limit, and names of none.
                let family = guess % 5 == 4 ? "nobody-\(guess)" : others[guess % 5]
                do {
                    _ = try await anyone.call(PairingMethods.acceptInvitation, AcceptInvitationParams(
                        family: family, invitationId: String(format: "%016x", guess), secret: "guess", deviceId: "x", deviceName: "X"))
                } catch let error as RPCError {
                    codes[error.code, default: 0] += 1
                }
            }
            #expect(codes[.invitationInvalid, default: 0] + codes[.limitExceeded, default: 0] == 500, "\(codes)")
            #expect(codes[.limitExceeded, default: 0] > 0, "the other families' own limits held: \(codes)")
            let accepted = try await anyone.call(PairingMethods.acceptInvitation, AcceptInvitationParams(
                family: "e", invitationId: invitation.invitationId, secret: invitation.secret, deviceId: "emma-ipad", deviceName: "iPad"))
            #expect(accepted.credential.deviceId == "emma-ipad")
            // Guesses at families that do not exist are not kept: the state file holds the
            // real families' failures only, at most their limit each.
            let saved = try String(contentsOfFile: harness.state + "/" + "pairing-attempts.json", encoding: .utf8)
            #expect(!saved.contains("nobody-"))
        }
    }

    @Test("40 wrong secrets at once to one invitation: each is counted, the fifth locks it, and the right secret is refused after")
    func concurrentGuessesLockTheInvitation() async throws {
        // Limits high enough that only the invitation's own lock is in play.
        try await PairingHarness.inProcess(configure: { $0.failuresPerFamily = 1000; $0.failuresPerAddress = 1000 }) { harness in
            let family = try await Bootstrapped.make(harness)
            let invitation = try await family.parent.call(PairingMethods.createInvitation, CreateInvitationParams(childId: "emma"))
            let anyone = harness.pairingClient()
            let codes = await Self.atOnce(40, anyone) { attempt in
                AcceptInvitationParams(family: "smith", invitationId: invitation.invitationId, secret: "guess-\(attempt)", deviceId: "x\(attempt)", deviceName: "X")
            }
            #expect(codes.allSatisfy { $0 == .invitationInvalid }, "\(codes)")
            let stored = try await harness.storeClient().call(StoreMethods.fetch, FetchParams(family: "smith", zone: "_pairing", recordNames: [invitation.invitationId]))
            #expect(stored.records.first?.fields["failedAttempts"] == 5, "\(String(describing: stored.records.first?.fields))")
            #expect(try await family.parent.call(PairingMethods.invitationStatus, InvitationParams(invitationId: invitation.invitationId)).status == .locked)
            await expectError(.invitationInvalid) {
                _ = try await anyone.call(PairingMethods.acceptInvitation, AcceptInvitationParams(
                    family: "smith", invitationId: invitation.invitationId, secret: invitation.secret, deviceId: "emma-ipad", deviceName: "iPad"))
            }
        }
    }

    @Test("40 guesses at once against the family limit of 10: ten are checked, the other thirty refused unchecked")
    func concurrentGuessesRespectTheFamilyLimit() async throws {
        try await PairingHarness.inProcess(configure: { $0.failuresPerFamily = 10 }) { harness in
            _ = try await Bootstrapped.make(harness)
            let codes = await Self.atOnce(40, harness.pairingClient()) { attempt in
                AcceptInvitationParams(family: "smith", invitationId: String(format: "%016x", attempt), secret: "guess", deviceId: "x", deviceName: "X")
            }
            #expect(codes.filter { $0 == .invitationInvalid }.count == 10, "\(codes)")
            #expect(codes.filter { $0 == .limitExceeded }.count == 30, "\(codes)")
        }
    }

    @Test("the wrong attempts counted survive a restart of the pairing service: the limit still holds after it")
    func rateLimitSurvivesARestart() async throws {
        let harness = try await PairingHarness.start(pairingArguments: ["--max-failures-per-family", "3"])
        defer { harness.stopNow() }
        _ = try await Bootstrapped.make(harness)
        for _ in 1...3 {
            await expectError(.invitationInvalid) {
                _ = try await harness.pairingClient().call(PairingMethods.acceptInvitation, AcceptInvitationParams(
                    family: "smith", invitationId: "0123456789abcdef", secret: "guess", deviceId: "x", deviceName: "X"))
            }
        }
        try await harness.restartPairing()
        let limited = await expectError(.limitExceeded) {
            _ = try await harness.pairingClient().call(PairingMethods.acceptInvitation, AcceptInvitationParams(
                family: "smith", invitationId: "0123456789abcdef", secret: "guess", deviceId: "x", deviceName: "X"))
        }
        #expect(limited?.message.contains("try again in") == true)
    }

    /// `count` acceptInvitation calls sent at once on one connection; each one's error code
    /// (nil: accepted).
    static func atOnce(_ count: Int, _ client: RPCClient, _ params: @escaping @Sendable (Int) -> AcceptInvitationParams) async -> [ErrorCode?] {
        await withTaskGroup(of: ErrorCode?.self) { group in
            for attempt in 0..<count {
                group.addTask {
                    do {
                        _ = try await client.call(PairingMethods.acceptInvitation, params(attempt))
                        return nil
                    } catch let error as RPCError { return error.code } catch { return nil }
                }
            }
            return await group.reduce(into: [ErrorCode?]()) { $0.append($1) }
        }
    }

    @Test("the service keeps only hashes: no secret or token is in the store's records")
    func onlyHashes() async throws {
        try await PairingHarness.inProcess { harness in
            let family = try await Bootstrapped.make(harness)
            let child = try await family.pairChild(harness)
            let admin = harness.storeClient()
            let stored = try await admin.call(StoreMethods.fetch, FetchParams(family: "smith", zone: "_pairing", recordNames: [child.invitation.invitationId]))
            let invitation = try #require(stored.records.first)
            #expect(invitation.fields["secretSHA256"]?.stringValue == SHA256Hex.of(child.invitation.secret))
            let everything = try await admin.call(StoreMethods.zoneChanges, ZoneChangesParams(family: "smith", zone: "_pairing"))
            let text = String(decoding: try JSONEncoder().encode(everything), as: UTF8.self)
            #expect(!text.contains(child.invitation.secret) && !text.contains(child.accepted.credential.token) && !text.contains(family.parentCredential.token))
        }
    }
}

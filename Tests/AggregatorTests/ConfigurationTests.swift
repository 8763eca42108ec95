import AggregatorAPI
import Foundation
import class GRDB.DatabaseQueue
import PairingAPI
import RPCCore
import StackSupport
import StoreAPI
import Testing
import TestSupport

/// The server owns what child devices apply: every active device's zone holds the family's
/// configuration as one `configuration` command, written by the aggregator, whoever saved
/// the rules.
@Suite("Aggregator: the family's configuration, sent to every child device", .serialized)
struct ConfigurationTests {
    @Test("a device paired after the rules were set gets them at once, as one snapshot; a raw store.modify rule change reaches every active device; a device that applied it is up to date, one that did not is behind; resync sends it again; a revoked device gets nothing more")
    func distribution() async throws {
        try await AggregatorStack.inProcess { stack in
            let first = stack.child
            try await stack.rule(bundleId: "org.khan", "learning", pointsPerMinute: 2)
            try await stack.rule(bundleId: "com.game", "reward", pointsPerMinute: 0)
            let firstSnapshot = try await Self.waitForSnapshot(stack, first) { $0.rules.map(\.bundleId) == ["com.game", "org.khan"] }
            #expect(firstSnapshot.rules.first { $0.bundleId == "org.khan" }?.pointsPerMinute == 2)

            // A tablet paired now, weeks after the rules: no parent action, one snapshot.
            let tablet = try await stack.family.pairChild(stack.harness, device: "emma-tablet")
            let tabletSnapshot = try await Self.waitForSnapshot(stack, tablet) { $0.rules.count == 2 }
            #expect(tabletSnapshot.rules == firstSnapshot.rules, "the same configuration")
            let pending = try await Self.pendingCommands(tablet, stack)
            #expect(pending.map(\.recordName) == [ConfigurationSnapshot.recordName], "one command, not one per change: \(pending.map(\.recordName))")

            // The first device applies its snapshot: up to date; the tablet has not: behind.
            let marked = try await Self.markExecuted(first, stack)
            try await eventually("the first device reported up to date") { seen in
                let states = try await stack.local.call(AggregatorMethods.devices, Empty(), actingFor: Auth(token: stack.family.parentCredential.token)).devices
                seen = "\(states)"
                let mine = states.first { $0.deviceId == first.deviceId }, theirs = states.first { $0.deviceId == tablet.deviceId }
                return mine?.behind == 0 && mine?.appliedVersion == marked && (theirs?.behind ?? 0) > 0 ? () : nil
            }

            // A rule changed by a raw store.modify (no client's help) reaches both devices.
            try await stack.rule(bundleId: "org.khan", "learning", pointsPerMinute: 5)
            for device in [first, tablet] {
                let snapshot = try await Self.waitForSnapshot(stack, device) { $0.rules.first { $0.bundleId == "org.khan" }?.pointsPerMinute == 5 }
                #expect(snapshot.version > firstSnapshot.version)
            }

            // Resync: the device asks, and its configuration is pending again.
            _ = try await Self.markExecuted(first, stack)
            let asked = try await stack.local.call(AggregatorMethods.resync, ResyncParams(), actingFor: Auth(token: first.token))
            let again = try await Self.waitForSnapshot(stack, first) { $0.version == asked.version }
            #expect(again.rules.count == 2)
            // A device not confirmed yet has no configuration to ask for; a local caller is
            // no device at all; the service goes on answering.
            let waiting = try await stack.family.pairChild(stack.harness, child: "leo", device: "leo-phone", confirm: false)
            await expectError(.notFound) { _ = try await stack.local.call(AggregatorMethods.resync, ResyncParams(), actingFor: Auth(token: waiting.token)) }
            await expectError(.unauthorized) { _ = try await stack.local.call(AggregatorMethods.resync, ResyncParams()) }
            await expectError(.unauthorized) { _ = try await stack.local.call(AggregatorMethods.resync, ResyncParams(), actingFor: Auth(token: "not-a-credential")) }
            _ = try await stack.local.call(AggregatorMethods.resync, ResyncParams(), actingFor: Auth(token: first.token))
            // A parent may not resync; a child may not list devices.
            await expectError(.invalidParams) { _ = try await stack.local.call(AggregatorMethods.resync, ResyncParams(), actingFor: Auth(token: stack.family.parentCredential.token)) }
            // A parent names one of its family's child devices: sent again; an unknown one is not found.
            let parent = Auth(token: stack.family.parentCredential.token)
            #expect(try await stack.local.call(AggregatorMethods.resync, ResyncParams(deviceId: first.deviceId), actingFor: parent).version >= 0)
            await expectError(.notFound) { _ = try await stack.local.call(AggregatorMethods.resync, ResyncParams(deviceId: "nobody"), actingFor: parent) }
            await expectError(.forbidden) { _ = try await stack.local.call(AggregatorMethods.resync, ResyncParams(deviceId: "someone-else"), actingFor: Auth(token: first.token)) }
            await #expect(throws: RPCError.self) { _ = try await stack.local.call(AggregatorMethods.devices, Empty(), actingFor: Auth(token: first.token)) }

            // Revoked: the tablet's zone gets no newer configuration.
            _ = try await stack.family.parent.call(PairingMethods.revokeDevice, DeviceParams(deviceId: tablet.deviceId))
            _ = try await AggregatorServiceTests.statusOnceCaughtUp(stack)
            let before = try await Self.snapshot(stack, tablet)?.version
            try await stack.rule(bundleId: "org.wiki", "learning", pointsPerMinute: 1)
            try await Self.waitForSnapshot(stack, first) { $0.rules.contains { $0.bundleId == "org.wiki" } }
            try await stack.settle(sessions: 0)
            #expect(try await Self.snapshot(stack, tablet)?.version == before, "a revoked device is sent nothing more")
            // And the aggregator itself refuses its credential, naming the device (it knows
            // of the revocation from the store's feed, not by asking the store).
            let refused = await expectError(.deviceRevoked) {
                _ = try await stack.local.call(AggregatorMethods.resync, ResyncParams(), actingFor: Auth(token: tablet.token))
            }
            #expect(refused?.data?["deviceId"]?.stringValue == tablet.deviceId)
        }
    }

    @Test("a replacement tablet for the same child: the old one revoked, the new one gets the rules at once; the child's balance, accruals and days carry on, the old tablet's usage still counted")
    func replacement() async throws {
        try await AggregatorStack.inProcess { stack in
            let old = stack.child
            try await stack.rule(bundleId: "org.khan", "learning", pointsPerMinute: 2)
            try await stack.session("old-1", from: stack.at("2026-11-20 09:00"), to: stack.at("2026-11-20 09:30"))
            try await stack.waitForBalance { $0?.fields["pointsBalance"]?.intValue == 60 }
            _ = try await stack.family.parent.call(PairingMethods.revokeDevice, DeviceParams(deviceId: old.deviceId))

            let replacement = try await stack.family.pairChild(stack.harness, device: "emma-tablet-2")
            let snapshot = try await Self.waitForSnapshot(stack, replacement) { $0.rules.map(\.bundleId) == ["org.khan"] }
            #expect(snapshot.rules.first?.pointsPerMinute == 2)
            // Usage on the new tablet adds to the same child's day and balance.
            let result = try await replacement.store.call(StoreMethods.modify, ModifyParams(family: stack.family.family, zone: replacement.zone, saves: [
                RecordSave(recordType: "UsageRecord", recordName: "new-1", fields: [
                    "logicalID": "org.khan", "deviceID": .string(replacement.deviceId), "category": "learning",
                    "sessionStart": .date(stack.at("2026-11-20 15:00")), "sessionEnd": .date(stack.at("2026-11-20 15:15")), "totalSeconds": 900,
                ]),
            ], savePolicy: .allKeys, atomic: true))
            #expect(result.allSucceeded)
            let balance = try await stack.waitForBalance { $0?.fields["pointsBalance"]?.intValue == 90 }
            #expect(balance?.fields["balanceSeconds"] == .int(90 * 60))
            // The ledger entries are written back beside the balance, not before it.
            let accrued = try await eventually("the day's accruals count both tablets") { seen in
                let accrued = try await stack.accrued("2026-11-20")
                seen = "\(accrued)"
                return accrued == 90 ? accrued : nil
            }
            #expect(accrued == 90)
            #expect(try await stack.summary("2026-11-20")?.points == 60, "the old tablet's day is kept")
        }
    }

    @Test("a database from before the configuration migration (devices with no pairing status): at its next start the aggregator reads them from the store and sends the active device its configuration again")
    func refreshAfterUpgrade() async throws {
        let stack = try await AggregatorStack.start()
        defer { stack.stopNow() }
        try await stack.rule(bundleId: "org.khan", "learning", pointsPerMinute: 2)
        try await Self.waitForSnapshot(stack, stack.child) { $0.rules.count == 1 }
        let before = try #require(try await Self.command(stack, stack.child))
        await stack.kill()
        // As an older aggregator left it: devices without a status, nothing queued.
        let database = try DatabaseQueue(path: stack.harness.state + "/aggregator.sqlite")
        try await database.write { db in try db.execute(sql: "UPDATE devices SET status = NULL; DELETE FROM config_outbox") }
        try await database.close()
        try await stack.restart()
        let after = try await eventually("the configuration sent again", detail: stack.aggregatorLog) { seen in
            let command = try await Self.command(stack, stack.child)
            seen = String(describing: command?.changeTag)
            return command.flatMap { $0.changeTag != before.changeTag ? $0 : nil }
        }
        #expect(ConfigurationSnapshot(commandType: after.fields["commandType"]?.stringValue, payloadJSON: after.fields["payloadJSON"]?.stringValue)?.rules.count == 1)
        // The line may reach the log file after the command reached the store.
        try await waitUntil("the aggregator says it read them again", detail: stack.aggregatorLog) {
            stack.aggregatorLog.contains("devices and rules read again from the store")
        }
    }

    static func command(_ stack: AggregatorStack, _ device: PairedChild) async throws -> StoreAPI.Record? {
        try await stack.parentStore.call(StoreMethods.fetch, FetchParams(
            family: stack.family.family, zone: device.zone, recordNames: [ConfigurationSnapshot.recordName])).records.first
    }

    /// The device's configuration, as the parent reads it from the device's zone.
    static func snapshot(_ stack: AggregatorStack, _ device: PairedChild) async throws -> ConfigurationSnapshot? {
        let record = try await stack.parentStore.call(StoreMethods.fetch, FetchParams(
            family: stack.family.family, zone: device.zone, recordNames: [ConfigurationSnapshot.recordName])).records.first
        return record.flatMap { ConfigurationSnapshot(commandType: $0.fields["commandType"]?.stringValue, payloadJSON: $0.fields["payloadJSON"]?.stringValue) }
    }

    @discardableResult
    static func waitForSnapshot(_ stack: AggregatorStack, _ device: PairedChild, until condition: @escaping (ConfigurationSnapshot) -> Bool) async throws -> ConfigurationSnapshot {
        try await eventually("\(device.deviceId)'s configuration coming to what was expected", detail: String(stack.aggregatorLog.suffix(3000))) { seen in
            let snapshot = try await Self.snapshot(stack, device)
            seen = String(describing: snapshot)
            return snapshot.flatMap { condition($0) ? $0 : nil }
        }
    }

    static func pendingCommands(_ device: PairedChild, _ stack: AggregatorStack) async throws -> [StoreAPI.Record] {
        try await device.store.call(StoreMethods.query, QueryParams(family: stack.family.family, zone: device.zone, recordType: "ConfigurationCommand",
                                                                    filters: [QueryFilter("status", .equal, "pending")])).records
    }

    /// The child marks its configuration executed, for the version it read (its change tag);
    /// returns that version.
    static func markExecuted(_ device: PairedChild, _ stack: AggregatorStack) async throws -> Int64 {
        let record = try #require(try await device.store.call(StoreMethods.fetch, FetchParams(
            family: stack.family.family, zone: device.zone, recordNames: [ConfigurationSnapshot.recordName])).records.first)
        var fields = record.fields
        fields["status"] = "executed"
        fields["executedAt"] = .date(Date())
        let result = try await device.store.call(StoreMethods.modify, ModifyParams(family: stack.family.family, zone: device.zone, saves: [
            RecordSave(recordType: "ConfigurationCommand", recordName: record.recordName, fields: fields, changeTag: record.changeTag),
        ], atomic: true))
        #expect(result.allSucceeded)
        return try #require(ConfigurationSnapshot(commandType: record.fields["commandType"]?.stringValue, payloadJSON: record.fields["payloadJSON"]?.stringValue)).version
    }
}

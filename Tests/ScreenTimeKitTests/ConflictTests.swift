import Foundation
import RPCCore
import ScreenTimeKit
import StoreAPI
import Testing
import TestSupport

@Suite("Conflicts", .serialized)
struct ConflictTests {
    @Test("a save on a stale change tag hands back the server's record, and the rebase keeps both sides' edits")
    func rebased() async throws {
        let stack = try await KitStack.start()
        defer { stack.stopAll() }
        let (mum, child, _) = try await stack.family()
        await child.close()
        // A second parent device of the same parent (its own kit, its own database).
        let code = try await mum.pairing.inviteParent()
        let dad = try stack.kit("dad")
        try await dad.pairing.enroll(family: "smith", code: code.code, deviceId: "dad-phone", deviceName: "Dad's phone")

        let policy = ShieldPolicy(familyRef: RecordReference("smith", zone: "default"), rewardCategories: ["games"], rewardApps: ["com.game"])
        let created = try await mum.records.save(TypedRecord(policy, recordName: "shield-family", zone: "default"))
        let dadsCopy = try #require(try await dad.records.fetch(ShieldPolicy.self, "shield-family", in: "default"))
        #expect(dadsCopy.changeTag == created.changeTag)

        // Mum adds an app.
        var mums = created
        mums.fields.rewardApps = ["com.game", "com.video"]
        let mumSaved = try await mum.records.save(mums)

        // Dad, on his older copy, adds another app and removes the category.
        var dads = dadsCopy
        dads.fields.rewardApps = ["com.game", "com.chat"]
        dads.fields.rewardCategories = []
        do {
            try await dad.records.save(dads)
            Issue.record("a save on a stale change tag succeeded")
        } catch let conflict as SaveConflict {
            let server = try #require(try conflict.server(as: ShieldPolicy.self))
            #expect(server.changeTag == mumSaved.changeTag)
            #expect(server.fields.rewardApps == ["com.game", "com.video"])
        }
        let merged = try await dad.records.save(dads, rebasingFrom: dadsCopy)
        #expect(Set(merged.fields.rewardApps ?? []) == ["com.game", "com.video", "com.chat"], "lists merge by union")
        #expect(merged.fields.rewardCategories == [], "the field only dad changed is his")
        let final = try #require(try await mum.records.fetch(ShieldPolicy.self, "shield-family", in: "default"))
        #expect(final.fields == merged.fields)
        #expect(final.changeTag == merged.changeTag)
        await mum.close()
        await dad.close()
    }

    @Test("rebase rules: my changed fields win, the server's others stand, set lists merge, my removals stay removed")
    func mergeRules() {
        let base: [String: JSONValue] = ["a": 1, "b": 1, "list": ["x", "y"], "gone": "g"]
        let mine: [String: JSONValue] = ["a": 2, "b": 1, "list": ["x", "z"]]
        let server: [String: JSONValue] = ["a": 3, "b": 5, "list": ["x", "y", "w"], "gone": "g", "new": true]
        let merged = Rebase.merge(base: base, mine: mine, server: server, setFields: ["list"])
        #expect(merged["a"] == 2)
        #expect(merged["b"] == 5)
        #expect(merged["list"] == ["x", "w", "z"])
        #expect(merged["gone"] == nil)
        #expect(merged["new"] == true)
        // Without a base, every field I send wins (a list of a set field still merges).
        let blind = Rebase.merge(base: nil, mine: ["a": 2, "list": ["q"]], server: server, setFields: ["list"])
        #expect(blind["a"] == 2)
        #expect(blind["b"] == 5)
        #expect(blind["list"] == ["x", "y", "w", "q"])
    }
}

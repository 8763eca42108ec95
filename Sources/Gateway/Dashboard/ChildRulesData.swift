import Foundation
import RPCCore
import StoreAPI

/// One child's own app rules (ChildAppRule records, saved as a parent's app saves them):
/// on the child's page, beside the family's rule each replaces; on the Apps page, under
/// the family's rule.
extension BrowserDevice {
    /// "a learning app, 2 points a minute", "a reward app", "blocked", "… (does not count)".
    static func ruleWords(_ classification: String, pointsPerMinute: Int64?, enabled: Bool?, blocked: Bool?) -> String {
        var words = classification == "learning"
            ? "a learning app" + (pointsPerMinute.map { ", \($0 == 1 ? "1 point" : "\($0) points") a minute" } ?? "")
            : "a reward app"
        if blocked == true { words = "blocked" }
        if enabled == false { words += " (does not count)" }
        return words
    }

    /// The child's page: its own rules, and the form that sets one.
    func childRulesCard(_ id: String, appNames: [String: String]) async throws(RPCError) -> [String: Any] {
        let family = try await self.all(AppRule.self, zone: StoreNames.defaultZone)
        let own = try await self.all(ChildAppRule.self, zone: StoreNames.defaultZone, filters: [
            QueryFilter(ChildAppRule.Field.childRef, .equal, .reference("child-\(id)", zone: StoreNames.defaultZone)),
        ])
        let rows = own.map { rule -> [String: Any] in
            let fields = rule.fields
            let base = family.first { $0.fields.bundleId == fields.bundleId }?.fields
            return ["bundleId": fields.bundleId, "name": appNames[fields.bundleId] ?? fields.bundleId,
                    "words": Self.ruleWords(fields.classification, pointsPerMinute: fields.pointsPerMinute, enabled: fields.isEnabled, blocked: fields.blockingEnabled),
                    "familyWords": base.map { Self.ruleWords($0.classification, pointsPerMinute: $0.pointsPerMinute, enabled: $0.isEnabled, blocked: $0.blockingEnabled) }
                        ?? "no rule"]
        }.sorted { ($0["name"] as! String).localizedCaseInsensitiveCompare($1["name"] as! String) == .orderedAscending }
        let apps = family.map { ["bundleId": $0.fields.bundleId, "name": $0.fields.displayName ?? $0.fields.bundleId] }
            .sorted { $0["name"]!.localizedCaseInsensitiveCompare($1["name"]!) == .orderedAscending }
        return ["ownRules": rows, "hasOwnRules": !rows.isEmpty, "ruleApps": apps, "hasRuleApps": !apps.isEmpty]
    }

    /// Saves the child's own rule for an app (every field, as the form gives it).
    func saveChildRule(_ id: String, form: [String: String]) async throws(RPCError) {
        let bundleId = (form["bundleId"] ?? "").trimmingCharacters(in: .whitespaces)
        guard !bundleId.isEmpty else { throw RPCError(.invalidParams, "Choose the app the rule is for") }
        let category = form["category"] ?? ""
        guard ["learning", "reward"].contains(category) else { throw RPCError.invalidParams("category", "is learning or reward") }
        let text = (form["pointsPerMinute"] ?? "").trimmingCharacters(in: .whitespaces)
        let points = text.isEmpty ? nil : Int64(text)
        if !text.isEmpty, points.map({ (0...1000).contains($0) }) != true { throw RPCError.invalidParams("pointsPerMinute", "is a whole number from 0 to 1000") }
        let rule = ChildAppRule(familyRef: .inDefaultZone(self.family), childRef: .inDefaultZone("child-\(id)"), bundleId: bundleId, classification: category,
                                pointsPerMinute: category == "learning" ? points : nil, isEnabled: form["enabled"] != "false",
                                blockingEnabled: form["blocked"] == "true")
        let result = try await self.call(StoreMethods.modify, ModifyParams(family: self.family, zone: StoreNames.defaultZone, saves: [
            try .record(rule, named: ChildAppRule.recordName(child: id, bundleId: bundleId)),
        ], savePolicy: .allKeys, atomic: true))
        if let error = result.saved.first?.error { throw RPCError(error.code, error.message) }
    }

    /// Removes the child's own rule for an app: the family's applies again.
    func resetChildRule(_ id: String, bundleId: String) async throws(RPCError) {
        let result = try await self.call(StoreMethods.modify, ModifyParams(family: self.family, zone: StoreNames.defaultZone,
                                                                           deletes: [RecordDelete(recordName: ChildAppRule.recordName(child: id, bundleId: bundleId))]))
        // Already gone (another parent, another tab): the family's rule applies, as asked.
        if let error = result.deleted.first?.error, error.code != .notFound { throw RPCError(error.code, error.message) }
    }

    /// The Apps page: each app's overrides by child, "Leo: blocked".
    func overridesByApp() async throws(RPCError) -> [String: [[String: Any]]] {
        let names = Dictionary(try await self.children().map { ($0.id, $0.name) }, uniquingKeysWith: { first, _ in first })
        var overrides: [String: [[String: Any]]] = [:]
        for rule in try await self.all(ChildAppRule.self, zone: StoreNames.defaultZone) {
            let fields = rule.fields
            let child = fields.childRef.recordName.hasPrefix("child-") ? String(fields.childRef.recordName.dropFirst(6)) : fields.childRef.recordName
            overrides[fields.bundleId, default: []].append([
                "child": child, "childName": names[child] ?? child,
                "words": Self.ruleWords(fields.classification, pointsPerMinute: fields.pointsPerMinute, enabled: fields.isEnabled, blocked: fields.blockingEnabled),
            ])
        }
        return overrides
    }
}

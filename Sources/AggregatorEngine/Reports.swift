import AggregatorAPI
import ChangeFeed
import Foundation
import RPCClient
import RPCCore
import StoreAPI
import UsageModel

/// `aggregator.report` and `aggregator.exportCSV`, from the computed days.
struct Reports: Sendable {
    let database: AggregatorDatabase
    let store: RPCClient
    let credentials: CredentialTable

    static let longestRange = 400

    func report(_ params: ReportParams, auth: Auth?) async throws -> Report {
        let scope = try await self.scope(params, auth: auth)
        let rows = try await self.database.days(family: scope.family, devices: scope.devices, from: params.from, to: params.to)
        let by = params.by ?? .day
        var periods: [String: Tally] = [:]
        var order: [String] = []
        for day in scope.days.days(from: params.from, through: params.to) {
            let period = by == .day ? day : (scope.days.monday(of: day) ?? day)
            if periods[period] == nil {
                periods[period] = Tally()
                order.append(period)
            }
        }
        var total = Tally()
        for row in rows {
            let period = by == .day ? row.day : (scope.days.monday(of: row.day) ?? row.day)
            periods[period, default: Tally()].add(row)
            total.add(row)
        }
        return Report(
            family: scope.family, child: params.child, deviceId: params.deviceId, from: params.from, to: params.to, by: by,
            timeZone: scope.timeZone,
            rows: order.map { period in
                let tally = periods[period] ?? Tally()
                return ReportRow(period: period, learningSeconds: tally.learning, rewardSeconds: tally.reward, points: tally.points, topApps: tally.top(5))
            },
            learningSeconds: total.learning, rewardSeconds: total.reward, points: total.points, topApps: total.top(10))
    }

    func exportCSV(_ params: ReportParams, auth: Auth?) async throws -> CSVExport {
        let scope = try await self.scope(params, auth: auth)
        // The ids for programs, the names parents gave (the app's rule, the device) for people.
        var lines = ["date,device_id,app,category,seconds,points,app_name,device_name"]
        let names = try await self.database.names(family: scope.family)
        for row in try await self.database.days(family: scope.family, devices: scope.devices, from: params.from, to: params.to) {
            for app in row.apps {
                lines.append(([row.day, row.deviceId].map(CSV.field) + [CSV.text(app.app), CSV.field(app.category?.rawValue ?? ""),
                              String(app.seconds), String(app.points), CSV.text(names.apps[app.app] ?? ""), CSV.text(names.devices[row.deviceId] ?? "")]).joined(separator: ","))
            }
        }
        return CSVExport(csv: lines.joined(separator: "\n") + "\n", lines: lines.count - 1)
    }

    // MARK: Checks

    private struct Scope {
        var family: String
        var devices: [String]
        var days: LocalDays
        /// As the Family record names it.
        var timeZone: String
    }

    /// Who asks for what: the family (a parent's own, or a local service's choice), the
    /// devices, the range.
    private func scope(_ params: ReportParams, auth: Auth?) async throws -> Scope {
        let family: String
        if let auth {
            let own = try await CallerIdentity.parentFamily(auth, credentials: self.credentials, for: "reports")
            guard params.family == nil || params.family == own else { throw RPCError(.forbidden, "a parent reports on their own family only") }
            family = own
        } else {
            guard let given = params.family else { throw RPCError.invalidParams("params.family", "is required for a local caller") }
            family = given
        }
        guard (params.child == nil) != (params.deviceId == nil) else {
            throw RPCError.invalidParams("params", "give exactly one of child and deviceId")
        }
        for (path, value) in [("params.from", params.from), ("params.to", params.to)] where LocalDays.parse(value) == nil {
            throw RPCError.invalidParams(path, "must be a date written YYYY-MM-DD, such as 2026-11-22")
        }
        guard params.from <= params.to else { throw RPCError.invalidParams("params.to", "must not be before params.from") }
        let timeZone = try await self.database.timeZone(of: family)
        let days = LocalDays(timeZone: timeZone) ?? LocalDays(timeZone: "UTC")!
        guard days.day(params.from, plus: Self.longestRange).map({ params.to < $0 }) ?? false else {
            throw RPCError.invalidParams("params.to", "a report covers at most \(Self.longestRange) days")
        }
        if let child = params.child {
            let devices = try await self.database.devices(ofChild: "child-\(child)", family: family)
            guard !devices.isEmpty else {
                throw RPCError(.notFound, "family \(family) has no child \(child) with a paired device", data: ["child": .string(child)])
            }
            return Scope(family: family, devices: devices, days: days, timeZone: timeZone)
        }
        let device = params.deviceId!
        guard try await self.database.knows(device: device, family: family) else {
            throw RPCError(.notFound, "family \(family) has no device \(device) that reported usage", data: ["deviceId": .string(device)])
        }
        return Scope(family: family, devices: [device], days: days, timeZone: timeZone)
    }
}

/// Sums of days, with their apps merged (reports, and retention's weekly summaries).
struct Tally {
    var learning: Int64 = 0
    var reward: Int64 = 0
    var points: Int64 = 0
    var apps: [String: ReportApp] = [:]

    mutating func add(_ row: AggregatorDatabase.DayRow) {
        self.learning += row.learningSeconds
        self.reward += row.rewardSeconds
        self.points += row.points
        for app in row.apps {
            var merged = self.apps[app.app] ?? ReportApp(app: app.app, category: app.category?.rawValue, seconds: 0, points: 0)
            merged.seconds += app.seconds
            merged.points += app.points
            self.apps[app.app] = merged
        }
    }

    /// Most used first; all of them without a count.
    func top(_ count: Int = .max) -> [ReportApp] {
        Array(self.apps.values.sorted { ($0.seconds, $1.app) > ($1.seconds, $0.app) }.prefix(count))
    }
}

enum CSV {
    /// Text a person or a child's device wrote (a name, an app id): as `field`, but one that
    /// a spreadsheet would read as a formula (`=`, `+`, `-`, `@`, a tab or a CR first) is
    /// made plain text with a leading `'`.
    static func text(_ text: String) -> String {
        guard let first = text.first, "=+-@\t\r".contains(first) else { return Self.field(text) }
        return Self.field("'" + text)
    }

    /// RFC 4180: quoted when it holds a comma, a quote or a line break; quotes doubled.
    static func field(_ text: String) -> String {
        guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

import AggregatorAPI
import Foundation
import RPCCore

/// A child's chores on its page, through the aggregator's chore methods as the browser's
/// parent device.
extension BrowserDevice {
    /// A child's chores on its page: each with today's state, those done and waiting with
    /// Approve and Send back, and the form that adds one.
    func choresCard(_ id: String, _ clock: FamilyClock) async throws(RPCError) -> [String: Any] {
        let list = try await self.call(AggregatorMethods.listChores, ListChoresParams(child: id))
        let chores = list.chores.map { chore -> [String: Any] in
            ["id": chore.id, "title": chore.title, "points": chore.points, "when": chore.when, "today": Self.choreToday(chore),
             "todayClass": chore.todayStatus == .approved ? "ok" : chore.todayStatus == .waiting ? "warn" : ""]
        }
        let waiting = list.completions.filter { $0.status == .waiting }.map { Self.waitingRow($0, clock) }
        let answered = list.completions.filter { $0.status != .waiting }.prefix(5).map { done -> [String: Any] in
            ["sentence": done.sentence, "when": clock.time(done.answeredAt ?? done.doneAt)]
        }
        return ["childId": id, "chores": chores, "hasChores": !chores.isEmpty, "waitingChores": waiting, "hasWaitingChores": !waiting.isEmpty,
                "answeredChores": Array(answered), "hasAnsweredChores": !answered.isEmpty,
                "choreDays": Weekday.allCases.map { ["day": $0.rawValue, "short": String($0.name.prefix(3)), "name": $0.name] }]
    }

    /// The family's chores done and waiting for a parent (the Overview's), each with its child.
    func waitingChores(_ clock: FamilyClock) async throws(RPCError) -> [[String: Any]] {
        try await self.call(AggregatorMethods.listChores, ListChoresParams()).completions.filter { $0.status == .waiting }.map { Self.waitingRow($0, clock) }
    }

    /// What the `choreWaiting` partial shows.
    static func waitingRow(_ done: ChoreCompletion, _ clock: FamilyClock) -> [String: Any] {
        ["id": done.id, "child": done.child, "sentence": done.sentence, "ago": clock.ago(done.doneAt), "when": clock.time(done.doneAt)]
    }

    static func choreToday(_ chore: ChoreInfo) -> String {
        switch chore.todayStatus {
        case .waiting?: "Done: waiting for you"
        case .approved?: chore.repeat == .once ? "Done" : "Done today"
        case .rejected?: "Sent back"
        case nil: chore.dueToday ? "To do" : "Not today"
        }
    }

    /// The add form's chore: every day, on the days ticked, or once.
    static func chore(from form: [String: String], child: String) throws(RPCError) -> SetChoreParams {
        let title = (form["title"] ?? "").trimmingCharacters(in: .whitespaces)
        guard let points = Int64((form["points"] ?? "").trimmingCharacters(in: .whitespaces)) else {
            throw RPCError.invalidParams("points", "is a whole number of points from 1 to 10000")
        }
        switch form["repeat"] {
        case "once": return SetChoreParams(child: child, title: title, points: points, repeat: .once)
        case "weekly":
            let days = Weekday.allCases.filter { form["day-\($0.rawValue)"] == "on" }
            guard !days.isEmpty else { throw RPCError(.invalidParams, "Tick the days the chore is for, or choose every day") }
            return SetChoreParams(child: child, title: title, points: points, repeat: .weekly, days: days)
        default: return SetChoreParams(child: child, title: title, points: points, repeat: .daily)
        }
    }
}

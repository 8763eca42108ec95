import AggregatorAPI
import Foundation
import RPCCore
import Testing

/// A report written by hand must say what `JSONEncoder` says.
@Suite("Reports on the wire without JSONEncoder")
struct ReportWritingTests {
    @Test("a report by day, with apps with and without a category, for a child or a device")
    func sameAsEncoder() throws {
        let apps = [ReportApp(app: "org.khan/academy", category: "learning", seconds: 600, points: 20), ReportApp(app: "x", category: nil, seconds: 1, points: 0)]
        let rows = [ReportRow(period: "2026-11-21", learningSeconds: 600, rewardSeconds: 1, points: 20, topApps: apps),
                    ReportRow(period: "2026-11-22", learningSeconds: 0, rewardSeconds: 0, points: 0, topApps: [])]
        for report in [
            Report(family: "f", child: "c1", deviceId: nil, from: "2026-11-21", to: "2026-11-22", by: .day, timeZone: "Europe/Paris",
                   rows: rows, learningSeconds: 600, rewardSeconds: 1, points: 20, topApps: apps),
            Report(family: "f", child: nil, deviceId: "d1", from: "2026-11-16", to: "2026-11-22", by: .week, timeZone: "UTC",
                   rows: [], learningSeconds: 0, rewardSeconds: 0, points: 0, topApps: []),
        ] {
            var writer = JSONWriter()
            try report.write(to: &writer)
            #expect(try JSONParser.parse(bytes: writer.bytes) == JSONParser.parse(bytes: Array(try RPCJSON.makeEncoder().encode(report))))
            #expect(try JSONValueDecoding.decode(Report.self, from: JSONParser.parse(bytes: writer.bytes)) == report)
        }
    }
}

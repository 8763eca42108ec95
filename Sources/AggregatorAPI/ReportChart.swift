import Foundation

/// Learning vs reward time per period, as grouped bars, in SVG: written by
/// `screentimectl report --svg` and shown by the dashboard's Reports page.
public enum ReportChart {
    /// `subject`: whose report, as a person reads it (the child's name); by default the
    /// child's id or the device.
    public static func svg(_ report: Report, subject: String? = nil) -> String {
        let rows = report.rows
        let left = 56.0, top = 48.0, bottom = 64.0, right = 16.0
        let slot = max(14.0, min(48.0, 900.0 / Double(max(rows.count, 1))))
        let plotWidth = slot * Double(rows.count), plotHeight = 240.0
        let width = left + plotWidth + right, height = top + plotHeight + bottom
        let most = max(rows.map { max($0.learningSeconds, $0.rewardSeconds) }.max() ?? 0, 60)
        let step = Self.niceStep(Double(most) / 60 / 4)  // minutes per gridline
        let scaleTop = step * ceil(Double(most) / 60 / step)
        let y = { (seconds: Int64) in top + plotHeight - Double(seconds) / 60 / scaleTop * plotHeight }
        var svg = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" viewBox="0 0 \(Int(width)) \(Int(height))" font-family="sans-serif" font-size="11">
            <title>\(Self.escape("Learning and reward time, \(report.from) to \(report.to)"))</title>
            <rect width="100%" height="100%" fill="white"/>
            <text x="\(left)" y="18" font-size="13" font-weight="bold">\(Self.escape("\(subject ?? report.child ?? "Device \(report.deviceId ?? "")"): learning vs reward, by \(report.by.rawValue)"))</text>
            <rect x="\(left)" y="24" width="10" height="10" fill="#2e7d32"/><text x="\(left + 14)" y="33">learning</text>
            <rect x="\(left + 74)" y="24" width="10" height="10" fill="#ef6c00"/><text x="\(left + 88)" y="33">reward</text>

            """
        var mark = 0.0
        while mark <= scaleTop + 0.001 {
            let lineY = y(Int64(mark * 60))
            svg += "<line x1=\"\(left)\" y1=\"\(Self.f(lineY))\" x2=\"\(Self.f(left + plotWidth))\" y2=\"\(Self.f(lineY))\" stroke=\"#ddd\"/>"
            svg += "<text x=\"\(Self.f(left - 6))\" y=\"\(Self.f(lineY + 4))\" text-anchor=\"end\">\(Self.minutesLabel(mark))</text>\n"
            mark += step
        }
        let labelEvery = max(1, Int(ceil(Double(rows.count) / 16)))
        for (index, row) in rows.enumerated() {
            let x = left + Double(index) * slot
            let bar = slot * 0.36
            for (offset, seconds, color) in [(slot * 0.12, row.learningSeconds, "#2e7d32"), (slot * 0.52, row.rewardSeconds, "#ef6c00")] where seconds > 0 {
                svg += "<rect x=\"\(Self.f(x + offset))\" y=\"\(Self.f(y(seconds)))\" width=\"\(Self.f(bar))\" height=\"\(Self.f(top + plotHeight - y(seconds)))\" fill=\"\(color)\"><title>\(row.period): \(Self.duration(seconds))</title></rect>"
            }
            if index % labelEvery == 0 {
                let labelX = x + slot / 2, labelY = top + plotHeight + 12
                svg += "<text x=\"\(Self.f(labelX))\" y=\"\(Self.f(labelY))\" text-anchor=\"end\" transform=\"rotate(-45 \(Self.f(labelX)) \(Self.f(labelY)))\">\(row.period)</text>"
            }
            svg += "\n"
        }
        svg += "<line x1=\"\(left)\" y1=\"\(Self.f(top + plotHeight))\" x2=\"\(Self.f(left + plotWidth))\" y2=\"\(Self.f(top + plotHeight))\" stroke=\"#333\"/>\n</svg>\n"
        return svg
    }

    /// 1, 2 or 5 times a power of ten, at least `raw`.
    static func niceStep(_ raw: Double) -> Double {
        let power = pow(10, floor(log10(max(raw, 1))))
        return [1.0, 2, 5, 10].map { $0 * power }.first { $0 >= raw } ?? 10 * power
    }

    static func minutesLabel(_ minutes: Double) -> String {
        minutes >= 60 && minutes.truncatingRemainder(dividingBy: 60) == 0 ? "\(Int(minutes / 60))h" : "\(Int(minutes))m"
    }

    /// `45s`, `12m`, `1h 05m` (as `screentimectl`'s tables write times).
    static func duration(_ seconds: Int64) -> String {
        if seconds == 0 { return "0" }
        if seconds < 60 { return "\(seconds)s" }
        let minutes = seconds / 60
        return minutes < 60 ? "\(minutes)m" : String(format: "%dh %02dm", minutes / 60, minutes % 60)
    }

    static func f(_ value: Double) -> String { String(format: "%.1f", value) }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}

import RPCCore
import StoreAPI

// A report (a row a day, each with its top apps) written by hand (see `JSONWritable`),
// as its synthesized `Encodable` would; AggregatorTests checks the two agree.

extension ReportRow: JSONWritable {
    public func write(to writer: inout JSONWriter) throws {
        writer.beginObject()
        writer.member("period", self.period)
        writer.member("learningSeconds", self.learningSeconds)
        writer.member("rewardSeconds", self.rewardSeconds)
        writer.member("points", self.points)
        writer.member("topApps")
        try writer.array(self.topApps)
        writer.endObject()
    }
}

extension Report: JSONWritable {
    public func write(to writer: inout JSONWriter) throws {
        writer.beginObject()
        writer.member("family", self.family)
        writer.member("child", self.child)
        writer.member("deviceId", self.deviceId)
        writer.member("from", self.from)
        writer.member("to", self.to)
        writer.member("by", self.by.rawValue)
        writer.member("timeZone", self.timeZone)
        writer.member("rows")
        try writer.array(self.rows)
        writer.member("learningSeconds", self.learningSeconds)
        writer.member("rewardSeconds", self.rewardSeconds)
        writer.member("points", self.points)
        writer.member("topApps")
        try writer.array(self.topApps)
        writer.endObject()
    }
}

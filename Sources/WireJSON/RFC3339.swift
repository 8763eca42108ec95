import Foundation

/// The wire's one date format, RFC 3339 in UTC with milliseconds (`2026-11-22T08:30:00.000Z`),
/// written and read by hand: every record carries dates, and Foundation's format styles
/// cost more than the rest of a small reply.
public enum RFC3339 {
    /// `2026-11-22T08:30:00.000Z`, to the nearest millisecond.
    public static func format(_ date: Date) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        self.append(date, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends the formatted date to `bytes`.
    public static func append(_ date: Date, to bytes: inout [UInt8]) {
        let millis = Int64((date.timeIntervalSince1970 * 1000).rounded())
        let seconds = millis.floorDivided(by: 1000)
        let days = seconds.floorDivided(by: 86_400)
        let (year, month, day) = self.civil(days: days)
        if year < 0 || year > 9999 {
            // Outside what four digits hold: Foundation's own text, rare enough not to matter.
            bytes.append(contentsOf: date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)).utf8)
            return
        }
        let secondOfDay = Int(seconds - days * 86_400)
        let fraction = Int(millis - seconds * 1000)
        // Written into a fixed buffer and appended once (a byte at a time, the array's
        // checks were most of a date's cost).
        var text: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &text) { out in
            func put(_ value: Int, _ count: Int, at offset: Int) {
                var rest = value
                for index in stride(from: offset + count - 1, through: offset, by: -1) {
                    out[index] = UInt8(ascii: "0") + UInt8(rest % 10)
                    rest /= 10
                }
            }
            put(year, 4, at: 0)
            out[4] = UInt8(ascii: "-")
            put(month, 2, at: 5)
            out[7] = UInt8(ascii: "-")
            put(day, 2, at: 8)
            out[10] = UInt8(ascii: "T")
            put(secondOfDay / 3600, 2, at: 11)
            out[13] = UInt8(ascii: ":")
            put(secondOfDay / 60 % 60, 2, at: 14)
            out[16] = UInt8(ascii: ":")
            put(secondOfDay % 60, 2, at: 17)
            out[19] = UInt8(ascii: ".")
            put(fraction, 3, at: 20)
            out[23] = UInt8(ascii: "Z")
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: out[0..<24]))
        }
    }

    /// The proleptic Gregorian date of a day counted from 1970-01-01, the inverse of
    /// ``daysFromCivil(year:month:day:)`` (no time zone, so none of the locking in libc's
    /// `gmtime_r`).
    static func civil(days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = z.floorDivided(by: 146_097)
        let dayOfEra = z - era * 146_097                                              // [0, 146096]
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365  // [0, 399]
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)  // [0, 365], from March 1
        let shiftedMonth = (5 * dayOfYear + 2) / 153                                   // [0, 11], March = 0
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (Int(year), Int(month), Int(day))
    }

    /// Reads `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; nil for anything else.
    public static func parse(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { self.parse(bytes: $0) }
    }

    static func parse(bytes: UnsafeBufferPointer<UInt8>) -> Date? {
        var index = 0
        func number(_ count: Int) -> Int? {
            guard index + count <= bytes.count else { return nil }
            var value = 0
            for offset in 0..<count {
                let byte = bytes[index + offset]
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            index += count
            return value
        }
        func literal(_ byte: UInt8, or other: UInt8? = nil) -> Bool {
            guard index < bytes.count, bytes[index] == byte || bytes[index] == other else { return false }
            index += 1
            return true
        }
        guard let year = number(4), literal(UInt8(ascii: "-")), let month = number(2), literal(UInt8(ascii: "-")),
            let day = number(2), literal(UInt8(ascii: "T"), or: UInt8(ascii: "t")), let hour = number(2), literal(UInt8(ascii: ":")),
            let minute = number(2), literal(UInt8(ascii: ":")), let second = number(2),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var fraction = 0.0
        if literal(UInt8(ascii: ".")) {
            var scale = 0.1
            let start = index
            while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
                fraction += Double(bytes[index] - UInt8(ascii: "0")) * scale
                scale /= 10
                index += 1
            }
            guard index > start else { return nil }
        }
        var offsetSeconds = 0
        if literal(UInt8(ascii: "Z"), or: UInt8(ascii: "z")) {
            offsetSeconds = 0
        } else if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
            let sign = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            index += 1
            guard let hours = number(2), literal(UInt8(ascii: ":")), let minutes = number(2), hours < 24, minutes < 60 else { return nil }
            offsetSeconds = sign * (hours * 3600 + minutes * 60)
        } else {
            return nil
        }
        guard index == bytes.count else { return nil }
        guard day <= self.daysIn(month: month, year: year) else { return nil }
        let days = self.daysFromCivil(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds
        // Milliseconds are what the wire carries: round the fraction to them, as the writer does.
        let millis = Double(seconds) * 1000 + (fraction * 1000).rounded()
        return Date(timeIntervalSince1970: millis / 1000)
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}

extension Int64 {
    fileprivate func floorDivided(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}

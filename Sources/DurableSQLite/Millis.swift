import Foundation

/// Times as the services store them: whole milliseconds since 1970, rounded.
public enum Millis {
    public static func of(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
    public static func now() -> Int64 { Self.of(Date()) }
    public static func date(_ millis: Int64) -> Date { Date(timeIntervalSince1970: Double(millis) / 1000) }
}

import ArgumentParser

/// The range check every option of a number makes, with one wording:
/// `--flag must be between 1 and 100 seconds`.
public func checkOption<Value: BinaryInteger>(_ flag: String, _ value: Value, in range: ClosedRange<Value>, _ unit: String? = nil) throws {
    guard !range.contains(value) else { return }
    throw ValidationError(rangeMessage(flag, "\(range.lowerBound)", "\(range.upperBound)", unit))
}

/// The same for seconds, fractions and the like; whole bounds are written without a `.0`.
public func checkOption(_ flag: String, _ value: Double, in range: ClosedRange<Double>, _ unit: String? = nil) throws {
    guard !range.contains(value) else { return }
    throw ValidationError(rangeMessage(flag, plain(range.lowerBound), plain(range.upperBound), unit))
}

private func rangeMessage(_ flag: String, _ lower: String, _ upper: String, _ unit: String?) -> String {
    "\(flag) must be between \(lower) and \(upper)" + (unit.map { " " + $0 } ?? "")
}

private func plain(_ value: Double) -> String {
    value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
}

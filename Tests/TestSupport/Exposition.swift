/// A Prometheus text exposition as a test reads it: each metric's `# TYPE`, and each
/// series (its name with its labels, as written) with its value.
public struct Exposition: Sendable {
    /// Metric name → `counter`, `gauge`, `histogram`, …
    public private(set) var types: [String: String] = [:]
    /// `name{label="value",…}` → value.
    public private(set) var series: [String: Double] = [:]

    public init(_ text: String) {
        for line in text.split(separator: "\n") {
            if line.hasPrefix("# TYPE ") {
                let parts = line.dropFirst("# TYPE ".count).split(separator: " ")
                if parts.count == 2 { self.types[String(parts[0])] = String(parts[1]) }
                continue
            }
            guard !line.hasPrefix("#"), let space = line.lastIndex(of: " ") else { continue }
            self.series[String(line[..<space])] = Double(line[line.index(after: space)...])
        }
    }

    /// The value of `name` with exactly these labels (in the order written), or nil.
    public func value(_ name: String, _ labels: KeyValuePairs<String, String> = [:]) -> Double? {
        let written = labels.isEmpty ? name : name + "{" + labels.map { "\($0.key)=\"\($0.value)\"" }.joined(separator: ",") + "}"
        return self.series[written]
    }

    /// Every label name used, over all series.
    public var labelNames: Set<String> {
        var names = Set<String>()
        for key in self.series.keys {
            guard let open = key.firstIndex(of: "{") else { continue }
            // `a="x",b="y"`: names are what precedes each `="`.
            var rest = key[key.index(after: open)...].dropLast()
            while let equals = rest.range(of: "=\"") {
                names.insert(String(rest[..<equals.lowerBound]))
                guard let close = rest[equals.upperBound...].firstIndex(of: "\"") else { break }
                rest = rest[rest.index(after: close)...]
                if rest.hasPrefix(",") { rest = rest.dropFirst() }
            }
        }
        return names
    }
}

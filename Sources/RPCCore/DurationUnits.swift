extension Duration {
    /// Whole microseconds, for log fields such as `duration_us`.
    public var microseconds: Int64 {
        let (seconds, attoseconds) = self.components
        return seconds * 1_000_000 + attoseconds / 1_000_000_000_000
    }

    /// Seconds with their fraction, for rates and for adding to a `Date`.
    public var seconds: Double {
        Double(self.components.seconds) + Double(self.components.attoseconds) / 1e18
    }
}

import ServiceMetrics

/// The pairing service's own instruments: attempts to redeem an invitation or enrollment
/// code by outcome (`paired`, `wrong_secret`, `locked_out`: refused while its family is
/// locked out, `error`), and lockouts (a family's wrong secret that reached its limit).
struct PairingMetrics: Sendable {
    let attempts: LabelledInstruments<Counter>
    let lockouts: Counter

    init(_ metrics: ServiceMetrics) {
        self.attempts = LabelledInstruments { outcome, _ in metrics.counter("attempts_total", [("outcome", outcome)]) }
        self.lockouts = metrics.counter("lockouts_total")
        // Every outcome from the start, at zero: a rate over a series that appears late
        // misses its first increase.
        for outcome in ["paired", "wrong_secret", "locked_out", "error"] { _ = self.attempts(outcome) }
    }

    static let none = PairingMetrics(ServiceMetrics(service: "pairing", enabled: false))
}

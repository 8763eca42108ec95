/// Runs the bodies given for one key one at a time, in the order they came, while bodies
/// for other keys run meanwhile. The pairing service checks a secret and records the
/// outcome as one step per invitation, and decides parents' revocations one at a time per
/// family, with it. (Neither SwiftNIO nor the other packages we use have an async lock per
/// key; this is a queue of continuations per key.)
actor KeyedSerializer {
    /// A key is present while a body for it runs; its value, the bodies waiting their turn.
    private var waiting: [String: [CheckedContinuation<Void, Never>]] = [:]

    nonisolated func run<T: Sendable>(_ key: String, _ body: @Sendable () async throws -> T) async throws -> T {
        await self.acquire(key)
        do {
            let value = try await body()
            await self.release(key)
            return value
        } catch {
            await self.release(key)
            throw error
        }
    }

    private func acquire(_ key: String) async {
        guard self.waiting[key] != nil else {
            self.waiting[key] = []
            return
        }
        await withCheckedContinuation { continuation in self.waiting[key, default: []].append(continuation) }
    }

    private func release(_ key: String) {
        guard var queue = self.waiting[key], !queue.isEmpty else {
            self.waiting[key] = nil
            return
        }
        let next = queue.removeFirst()
        self.waiting[key] = queue
        next.resume()
    }
}

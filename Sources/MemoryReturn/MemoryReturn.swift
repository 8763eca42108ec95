import Glibc
import Synchronization

/// Gives memory the allocator keeps back to the system after the process held much for a
/// while: push, once a listener that held much is gone; the gateway, after reading a big
/// family's credentials. glibc keeps freed memory in its arenas (one per thread that
/// allocated), and raises its threshold for mapping big blocks on their own as they are
/// freed, so the megabytes a stalled listener's replies took stayed with the process after
/// it went: `malloc_trim` returns the free pages of every arena.
///
/// The trim waits until no request has come for `settle`: a closing connection fails its
/// pending writes (and so drains its listeners) before it frees their buffers, and a
/// connection of many listeners asks once per listener.
public enum MemoryReturn {
    /// A listener that held less than this leaves too little to be worth a trim.
    public static let worthwhile = 256 * 1024
    static let settle = Duration.milliseconds(200)

    private static let requests = Atomic<Int>(0)
    private static let waiting = Atomic<Bool>(false)

    /// glibc's `malloc_trim`, looked up at run time (Swift's Glibc module leaves out
    /// malloc.h); nil on a C library without it.
    private static let trim: (@convention(c) (Int) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
    }()

    public static func request() {
        guard let trim = self.trim else { return }
        self.requests.add(1, ordering: .relaxed)
        guard !self.waiting.exchange(true, ordering: .acquiringAndReleasing) else { return }
        Task.detached(priority: .background) {
            var seen = self.requests.load(ordering: .relaxed)
            while true {
                try? await Task.sleep(for: self.settle)
                let now = self.requests.load(ordering: .relaxed)
                if now == seen { break }
                seen = now
            }
            // A request from now on starts a wait of its own.
            self.waiting.store(false, ordering: .releasing)
            // Not on an event loop: a trim of a large heap takes milliseconds.
            _ = trim(0)
        }
    }
}

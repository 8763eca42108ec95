import NIOCore

/// Runs a connection's tasks on the event-loop thread that reads its socket.
///
/// A request then goes from the socket to its handler and back to the socket without
/// changing threads: each hop between NIO's loop and Swift's global pool costs a thread
/// wake-up, which is most of a small request's latency. The price is that a handler's
/// synchronous work holds the loop, and other connections on that loop wait for it (there
/// is one loop per core): so no handler may wait on a loop for anything that needs a loop
/// to make progress, a database reader above all (docs/architecture.md, "One request's
/// path").
final class EventLoopExecutor: TaskExecutor {
    let loop: any EventLoop

    init(_ loop: any EventLoop) {
        self.loop = loop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        self.loop.execute {
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
    }
}

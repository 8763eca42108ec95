import NIOCore
import Synchronization

/// Counts the connections open in total and per address (``AddressKey``: an IPv6 /64 as
/// one) and admits a new one only under both limits; an admitted connection is counted out
/// when it closes. What a flood of connections from one machine meets: it holds at most
/// `perAddress` of them, and every other address is still served.
public final class ConnectionGate: Sendable {
    /// Why a connection was not admitted.
    public enum Refusal: Sendable, Equatable {
        case total(limit: Int)
        case address(key: String, limit: Int)
    }

    public let total: Int
    public let perAddress: Int
    private let state = Mutex<(open: Int, byAddress: [String: Int])>((0, [:]))

    public init(total: Int, perAddress: Int) {
        self.total = total
        self.perAddress = perAddress
    }

    public var openConnections: Int { self.state.withLock { $0.open } }

    /// Admits `channel` (nil) or says why not; an admitted one is counted until it closes.
    public func admit(_ channel: any Channel) -> Refusal? {
        let address = AddressKey.of(channel.remoteAddress?.ipAddress ?? "unknown")
        let refusal = self.state.withLock { state -> Refusal? in
            if state.open >= self.total { return .total(limit: self.total) }
            guard state.byAddress[address, default: 0] < self.perAddress else { return .address(key: address, limit: self.perAddress) }
            state.open += 1
            state.byAddress[address, default: 0] += 1
            return nil
        }
        guard refusal == nil else { return refusal }
        channel.closeFuture.whenComplete { _ in
            self.state.withLock { state in
                state.open -= 1
                if let count = state.byAddress[address], count > 1 { state.byAddress[address] = count - 1 } else { state.byAddress[address] = nil }
            }
        }
        return nil
    }
}

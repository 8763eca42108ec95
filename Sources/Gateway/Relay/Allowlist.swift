import AggregatorAPI
import PairingAPI
import PushAPI
import RPCCore
import StoreAPI

/// A method a device may call through the gateway, as its service's list declares it.
public struct DeviceMethod: Sendable {
    public var name: String
    /// The service that serves it (`store` for `store.sock`).
    public var service: String
    public var callers: Callers
    public var kind: MethodDescription.Kind
    let declared: any DeclaredMethod
    /// Its description for `rpc.describe`, read off its types when asked (not at start-up).
    public var description: MethodDescription { self.declared.describedAs }
}

/// What the gateway lets a device call: exactly the methods the four services' declared
/// lists (``MethodList``) mark as callable by a parent, a child or an unauthenticated
/// device. Nothing here is written by hand: a method added to a list with a device among
/// its callers is reachable, one marked `.local` only never is.
public struct Allowlist: Sendable {
    private let methods: [String: DeviceMethod]
    /// Every declared method, devices' or not: a local-only one is refused as such
    /// (`forbidden`), an unknown one as unknown (`method_not_found`).
    private let declared: Set<String>
    public let services: [String]

    public init(lists: [MethodList]) {
        var methods: [String: DeviceMethod] = [:]
        var declared = Set<String>()
        for list in lists {
            for method in list.methods {
                declared.insert(method.name)
                guard method.callers.includesDevices else { continue }
                methods[method.name] = DeviceMethod(name: method.name, service: list.service, callers: method.callers, kind: method.kind, declared: method)
            }
        }
        self.methods = methods
        self.declared = declared
        self.services = lists.map(\.service)
    }

    /// The four services' lists.
    public static let standard = Allowlist(lists: [StoreMethods.list, PairingMethods.list, PushMethods.list, AggregatorMethods.list])

    public func method(named name: String) -> DeviceMethod? { self.methods[name] }
    public func isDeclared(_ name: String) -> Bool { self.declared.contains(name) }

    /// The device-callable methods, by name.
    public var all: [DeviceMethod] { self.methods.values.sorted { $0.name < $1.name } }

    /// Whether `caller` may call `method`: a device with a credential of a role the method
    /// lists, or anyone for the unauthenticated pairing steps.
    public func admits(_ method: DeviceMethod, as caller: Caller?) -> Bool {
        if method.callers.contains(.unauthenticated) { return true }
        guard let caller else { return false }
        return method.callers.contains(Callers(caller))
    }
}

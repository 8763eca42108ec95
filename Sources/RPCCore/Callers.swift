/// Who may call a method, as its declaration says. The services check a caller's rights
/// again on every request (a parent of another family is still refused); this is the
/// coarse list the gateway enforces before anything reaches a service, and what
/// `rpc.describe` reports.
public enum Caller: String, StringEnum, Comparable {
    /// A local process on the server, with no `auth`: the administrator, another service.
    case local
    /// A parent's device (`admin` or `co_parent`), with its credential in `auth`.
    case parent
    /// A child's device, with its credential in `auth`.
    case child
    /// A device with no credential yet, whose proof is in the params (an enrollment code,
    /// an invitation secret): the pairing steps a new device takes.
    case unauthenticated

    public static func < (lhs: Caller, rhs: Caller) -> Bool {
        Self.allCases.firstIndex(of: lhs)! < Self.allCases.firstIndex(of: rhs)!
    }
}

/// A set of ``Caller``s.
public struct Callers: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let local = Callers(.local)
    public static let parent = Callers(.parent)
    public static let child = Callers(.child)
    public static let unauthenticated = Callers(.unauthenticated)
    /// Any device with a credential.
    public static let devices: Callers = [.parent, .child]
    /// Every kind of caller.
    public static let anyone: Callers = [.local, .parent, .child, .unauthenticated]

    public init(_ caller: Caller) {
        self.init(rawValue: 1 << UInt8(Caller.allCases.firstIndex(of: caller)!))
    }

    public init(_ callers: [Caller]) {
        self = callers.reduce(into: Callers()) { $0.insert(Callers($1)) }
    }

    /// The callers, in the order of ``Caller``'s cases.
    public var list: [Caller] { Caller.allCases.filter { self.contains(Callers($0)) } }

    /// Whether any device (with a credential or not) may call: what the gateway passes on.
    public var includesDevices: Bool { !self.isDisjoint(with: [.parent, .child, .unauthenticated]) }
}

/// A method as its API module declares it: the name, who may call it, and its description.
/// ``MethodSpec`` and ``StreamSpec`` are the two kinds.
public protocol DeclaredMethod: Sendable {
    var name: String { get }
    var callers: Callers { get }
    /// Unary or stream: known without reading the types' schemas, as `describedAs` does.
    var kind: MethodDescription.Kind { get }
    var describedAs: MethodDescription { get }
    /// Decodes a request's `params` (nil: absent or null) into this method's parameter type,
    /// exactly as the server does before it calls the handler (from the request's bytes):
    /// for checking a request without knowing its method's types (the fuzz target decodes
    /// every declared method's params through this).
    func decodeParams(_ params: RequestParams?) throws(RPCError) -> any Codable & Sendable
    /// The same from the params parsed (the path of a method whose params do not read
    /// themselves; the fuzz target checks both paths agree).
    func decodeParams(_ params: JSONValue?) throws(RPCError) -> any Codable & Sendable
}

/// The complete list of one service's methods, declared once in its API module. The
/// service's method table is built against it (a declared method without a handler stops
/// the service at start-up), `rpc.describe` reports it, and the gateway allows a device
/// exactly the methods it marks as callable by devices.
public struct MethodList: Sendable {
    /// The service's name, as in its socket (`store` for `store.sock`).
    public let service: String
    public let methods: [any DeclaredMethod]

    public init(service: String, _ methods: [any DeclaredMethod]) {
        var seen = Set<String>()
        for method in methods {
            precondition(seen.insert(method.name).inserted, "method \(method.name) declared twice in \(service)'s list")
        }
        self.service = service
        self.methods = methods
    }

    public var names: [String] { self.methods.map(\.name) }

    public func method(named name: String) -> (any DeclaredMethod)? {
        self.methods.first { $0.name == name }
    }
}

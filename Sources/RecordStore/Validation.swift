import RPCCore
import StoreAPI

/// Parameter checks shared by the methods.
enum Validation {
    /// Record names, family ids, device ids, request ids.
    static func identifier(_ value: String, _ parameter: String) throws {
        guard Names.isValidIdentifier(value) else {
            throw RPCError.invalidParams(parameter, "must be 1 to 255 bytes without control characters")
        }
    }

    static func family(_ family: String, _ parameter: String = "params.family") throws {
        try identifier(family, parameter)
    }

    static func zone(_ zone: String, _ parameter: String = "params.zone") throws {
        guard Names.isValidZone(zone) else {
            throw RPCError.invalidParams(parameter, "must be 1 to 255 letters, digits, '-', '_' or '.', not \"\(zone)\"")
        }
    }

    static func limit(_ limit: Int?, default value: Int, maximum: Int, _ parameter: String = "params.limit") throws -> Int {
        guard let limit else { return value }
        guard (1...maximum).contains(limit) else { throw RPCError.invalidParams(parameter, "must be between 1 and \(maximum), not \(limit)") }
        return limit
    }
}

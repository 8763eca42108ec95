import Foundation

/// A refusal by screentimectl itself (not by a service): a stable code, a sentence to act
/// on, and the exit status it ends the process with.
struct CLIError: Error, CustomStringConvertible {
    struct Code: Equatable {
        let name: String
        let exitStatus: Int32

        static let noProfile = Code(name: "no_profile", exitStatus: 66)
        static let badProfile = Code(name: "bad_profile", exitStatus: 65)
        static let profileExists = Code(name: "profile_exists", exitStatus: 73)
        static let wrongRole = Code(name: "wrong_role", exitStatus: 64)
        static let invalidInput = Code(name: "invalid_input", exitStatus: 65)
        static let cannotWrite = Code(name: "cannot_write", exitStatus: 73)
        static let refused = Code(name: "refused", exitStatus: 1)
        static let timeout = Code(name: "timeout", exitStatus: 75)
        /// A backup archive that is not whole (or not one at all).
        static let damagedArchive = Code(name: "damaged_archive", exitStatus: 65)
    }

    let code: Code
    let message: String

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    var description: String { "\(self.code.name): \(self.message)" }
}

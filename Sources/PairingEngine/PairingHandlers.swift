import PairingAPI
import RPCServer

/// Binds each `pairing.*` method to its flow.
enum PairingHandlers {
    static func table(_ pairing: PairingFlows) -> MethodTable {
        var methods = MethodTable(implementing: PairingMethods.list)
        methods.on(PairingMethods.createFamily) { params, context in try await pairing.createFamily(params, auth: context.auth) }
        methods.on(PairingMethods.enrollParent) { params, context in try await pairing.enrollParent(params, auth: context.auth, from: context.from) }
        methods.on(PairingMethods.inviteParent) { params, context in try await pairing.inviteParent(params, auth: context.auth) }
        methods.on(PairingMethods.createInvitation) { params, context in try await pairing.createInvitation(params, auth: context.auth) }
        methods.on(PairingMethods.acceptInvitation) { params, context in try await pairing.acceptInvitation(params, auth: context.auth, from: context.from) }
        methods.on(PairingMethods.invitationStatus) { params, context in try await pairing.invitationStatus(params, auth: context.auth) }
        methods.on(PairingMethods.confirm) { params, context in try await pairing.confirm(params, auth: context.auth) }
        methods.on(PairingMethods.reject) { params, context in try await pairing.reject(params, auth: context.auth) }
        methods.on(PairingMethods.revokeDevice) { params, context in try await pairing.revokeDevice(params, auth: context.auth) }
        methods.on(PairingMethods.removeChild) { params, context in try await pairing.removeChild(params, auth: context.auth) }
        methods.on(PairingMethods.rotateCredential) { _, context in try await pairing.rotateCredential(auth: context.auth) }
        methods.on(PairingMethods.signOut) { _, context in try await pairing.signOut(auth: context.auth) }
        methods.on(PairingMethods.listDevices) { _, context in try await pairing.listDevices(auth: context.auth) }
        return methods
    }
}

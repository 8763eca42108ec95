import AggregatorAPI
import ArgumentParser
import Foundation
import PairingAPI
import PushAPI
import QRCode
import RPCCore
import StoreAPI

struct FamilyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "family", abstract: "Create a family (on the server, as its administrator).",
        subcommands: [Create.self]
    )

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a family; print the enrollment code for its first parent device.",
            discussion: "Example:\n  screentimectl family create smith --time-zone Europe/Paris"
        )

        @OptionGroup var connection: ConnectionOptions
        @Argument(help: "The family's id (letters, digits, '-', '_').") var family: String
        @Option(help: "A name to show.") var displayName: String?
        @Option(help: "The family's IANA time zone, which days are counted in (default UTC).") var timeZone: String?

        func run() async throws {
            let admin = self.connection.client(for: "pairing", token: nil)
            let code = try await Output.orExit {
                try await admin.call(PairingMethods.createFamily, NewFamilyParams(family: self.family, displayName: self.displayName, timeZone: self.timeZone))
            }
            print("Family \(code.family) created. Enrollment code for its first parent (admin), valid until \(code.expiresAt.formatted(date: .abbreviated, time: .shortened)):")
            print("  \(code.code)")
            print("Enroll a parent device with:\n  screentimectl parent enroll --profile mum --family \(code.family) --code \(code.code)")
            if let link = code.dashboardLink { print("or sign in from a browser (the gateway's dashboard):\n  \(link)") }
        }
    }
}

struct ParentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "parent", abstract: "A parent's device: enroll it, invite a co-parent.",
        subcommands: [Enroll.self, Invite.self]
    )

    struct Enroll: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Enroll this profile as a parent device with an enrollment code; saves the profile.")

        @OptionGroup var device: DeviceOptions
        @Option(help: "The family.") var family: String
        @Option(help: "The enrollment code (from family create or parent invite).") var code: String
        @Option(help: "The device's name.") var deviceName: String?
        @Option(help: "The parent's name.") var displayName: String?

        func run() async throws {
            let parent = try await Output.orExit {
                try await Device.enrollParent(self.device, family: self.family, code: self.code, deviceName: self.deviceName, displayName: self.displayName)
            }
            print("\(parent.profile.name) is enrolled in \(parent.family) as parent device \(parent.profile.deviceId) (profile \(parent.options.profiles.path(parent.profile.name))).")
        }
    }

    struct Invite: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create an enrollment code for another parent (admin parents only).")

        @OptionGroup var device: DeviceOptions
        @Option(help: "admin or co_parent.") var role: String = "co_parent"

        func run() async throws {
            let code = try await Output.orExit {
                let parent = try self.device.device(.parent)
                guard let role = DeviceRole(rawValue: self.role) else { throw CLIError(.invalidInput, "--role is admin or co_parent, not \(self.role)") }
                return try await parent.pairing.call(PairingMethods.inviteParent, InviteParentParams(role: role))
            }
            print("Enrollment code for a \(code.role.rawValue) of \(code.family), valid until \(code.expiresAt.formatted(date: .abbreviated, time: .shortened)):\n  \(code.code)")
            if let link = code.dashboardLink { print("Or sign in from a browser (the gateway's dashboard):\n  \(link)") }
        }
    }
}

struct ChildCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "child", abstract: "Pair a child's device: invite (parent), accept (child), confirm or reject (parent).",
        discussion: """
            The parent runs `child invite`, which shows a QR code and the pairing link and waits; \
            the child runs `child accept LINK` and sees a short emoji code; the parent's screen shows \
            the same code once the child has accepted; if they match, the parent runs `child confirm`.
            """,
        subcommands: [Invite.self, Accept.self, Confirm.self, Reject.self]
    )

    struct Invite: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Invite a child device: print the QR code and link, wait for the child to accept, show the short code.")

        @OptionGroup var device: DeviceOptions
        @Argument(help: "The child's id (e.g. emma); a new child gets a ChildContext.") var child: String
        @Option(help: "The child's name.") var childName: String?
        @Option(help: "Seconds the invitation stays valid (default the server's, 600).") var expires: Double?
        @Option(help: "Seconds to wait for the child to accept.") var wait: Double = 600
        @Flag(help: "Print the invitation and return without waiting.") var noWait = false
        @Flag(help: "Do not draw the QR code.") var noQR = false

        func run() async throws {
            try await Output.orExit {
                var parent = try self.device.device(.parent)
                let invitation = try await parent.invite(child: self.child, childName: self.childName, expiresInSeconds: self.expires)
                if !self.noQR, let code = try? QRCode(encoding: invitation.uri) {
                    Output.line(String(code.terminalText(colors: isatty(STDOUT_FILENO) == 1).dropLast()))
                }
                Output.line("Invitation \(invitation.invitationId) for \(invitation.childId), valid until \(invitation.expiresAt.formatted(date: .omitted, time: .standard)).")
                // Through a gateway, the child accepts through it too (the pin is in the link).
                let server = parent.target.map { " --server \($0.urls[0])" } ?? ""
                Output.line("On the child's device:\n  screentimectl child accept --profile \(self.child)-tablet\(server) '\(invitation.uri)'")
                if self.noWait { return }
                Progress.note("waiting for the child's device to accept (Ctrl-C to stop waiting; the invitation stays valid)…")
                let info = try await parent.waitForAcceptance(invitation.invitationId, timeout: .milliseconds(Int64(self.wait * 1000)))
                guard info.status == .accepted else { throw CLIError(.refused, "the invitation is \(info.status.rawValue)") }
                Output.line("\(info.deviceName ?? "A device") (\(info.deviceId ?? "?")) accepted.")
                if let code = parent.shortCode(info) {
                    Output.line("Check that the child's screen shows the same code:\n  \(code.emojiLine)   (\(code.namesLine))")
                }
                Output.line("Then confirm:  screentimectl child confirm --profile \(parent.profile.name) \(info.invitationId)\nor reject:     screentimectl child reject --profile \(parent.profile.name) \(info.invitationId)")
            }
        }
    }

    struct Accept: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Accept an invitation as this profile's child device; print the short code to compare with the parent's.",
            discussion: "On the server's own machine it uses the local sockets; elsewhere it reaches the gateway the link names (its url= and pin=), so --server is needed only to use another address.")

        @OptionGroup var device: DeviceOptions
        @Argument(help: "The pairing link from the QR code (screentime://pair?…), or - to read it from standard input.") var link: String
        @Option(help: "The device's name.") var deviceName: String?

        func run() async throws {
            try await Output.orExit {
                let text = self.link == "-" ? String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self) : self.link
                let (child, accepted) = try await Device.acceptInvitation(self.device, link: try Device.pairingURI(text), deviceName: self.deviceName)
                print("\(child.profile.name) joined \(child.family) as \(accepted.childId)'s device \(child.profile.deviceId), zone \(accepted.zone).")
                print("Short code (the parent's screen must show the same):\n  \(accepted.shortCode.emojiLine)   (\(accepted.shortCode.namesLine))")
                print("Waiting for a parent to confirm: until then the server refuses this device's writes.")
            }
        }
    }

    struct Confirm: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Confirm a child device that accepted an invitation (after comparing the short codes).")
        @OptionGroup var device: DeviceOptions
        @Argument(help: "The invitation id.") var invitation: String

        func run() async throws { try await decide(self.device, self.invitation, confirm: true) }
    }

    struct Reject: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Reject the device that accepted an invitation (the codes differ): its credential is revoked.")
        @OptionGroup var device: DeviceOptions
        @Argument(help: "The invitation id.") var invitation: String

        func run() async throws { try await decide(self.device, self.invitation, confirm: false) }
    }

    static func decide(_ options: DeviceOptions, _ invitation: String, confirm: Bool) async throws {
        try await Output.orExit {
            var parent = try options.device(.parent)
            let info = try await parent.decide(invitation, confirm: confirm)
            print("\(info.deviceName ?? "The device") (\(info.deviceId ?? "?")) is \(info.status.rawValue) for \(info.childId)\(confirm ? "; it may now write to \(info.zone)" : "").")
        }
    }
}

struct DevicesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices", abstract: "List the family's devices (parent): state, whether each child device has the family's rules, last seen.",
        discussion: "Browsers signed out of the dashboard are left out; --all shows them.")
    @OptionGroup var device: DeviceOptions
    @Flag(help: "Print JSON.") var json = false
    @Flag(help: "Also list browsers signed out of the dashboard.") var all = false

    func run() async throws {
        try await Output.orExit {
            let parent = try self.device.device(.parent)
            let listed = try await parent.pairing.call(PairingMethods.listDevices, Empty()).devices
            let devices = listed.filter { self.all || !($0.isBrowserSession && $0.status == .revoked) }
            // Whether each child device applied the family's rules (blank if the aggregator
            // cannot say now).
            let states = (try? await parent.aggregator.call(AggregatorMethods.devices, Empty()).devices) ?? []
            let byDevice = Dictionary(states.map { ($0.deviceId, $0) }, uniquingKeysWith: { first, _ in first })
            // Connected now: an app with its connection open listens for notifications
            // (nothing said when push cannot tell now).
            let connected = Set((try? await parent.push.call(PushMethods.listening, ListeningParams()).deviceIds) ?? [])
            // Whether each device can be woken when its app sleeps, and how the last wake went.
            let wakes = Dictionary(((try? await parent.push.call(PushMethods.listWakes, ListWakesParams()).wakes) ?? []).map { ($0.deviceId, $0) },
                                   uniquingKeysWith: { first, _ in first })
            if self.json {
                // Each device as pairing lists it, with what the table's other columns say:
                // its configuration as the aggregator knows it, its wake, whether it listens now.
                let rows = try devices.map { device -> JSONValue in
                    var row = try JSONValue(encoding: device).objectValue ?? [:]
                    if let state = byDevice[device.deviceId] { row["configuration"] = try JSONValue(encoding: state) }
                    if let wake = wakes[device.deviceId] { row["wake"] = try JSONValue(encoding: wake) }
                    row["connected"] = .bool(connected.contains(device.deviceId) && device.status == .active)
                    return .object(row)
                }
                return Output.print(.array(rows), pretty: self.device.connection.prettyOutput)
            }
            print(Table.render(["DEVICE", "NAME", "ROLE", "STATUS", "CHILD", "RULES", "APP", "WAKES", "LAST SEEN"], devices.map { device in
                [device.deviceId, device.deviceName ?? "", device.role.rawValue,
                 device.status.rawValue + (device.status == .active ? byDevice[device.deviceId]?.clockOff.map { ", clock \($0)" } ?? "" : ""), device.childId ?? "",
                 device.role == .child && device.status == .active ? byDevice[device.deviceId]?.summary ?? "" : "",
                 byDevice[device.deviceId]?.appVersion ?? "",
                 device.status == .active ? wakes[device.deviceId]?.summary ?? "" : "",
                 connected.contains(device.deviceId) && device.status == .active
                     ? "connected now" : device.lastSeenAt?.formatted(date: .abbreviated, time: .shortened) ?? ""]
            }), terminator: "")
            let hidden = listed.count - devices.count
            if hidden > 0 { print("(\(Output.count(hidden, "signed-out browser", "signed-out browsers")) not shown: --all)") }
        }
    }
}

struct DeviceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "device", abstract: "Act on one device of the family (parent).", subcommands: [Revoke.self])

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke a device: its credential stops working at once; its data stays.")
        @OptionGroup var device: DeviceOptions
        @Argument(help: "The device id (see devices).") var deviceId: String

        func run() async throws {
            try await Output.orExit {
                let parent = try self.device.device(.parent)
                let info = try await parent.pairing.call(PairingMethods.revokeDevice, DeviceParams(deviceId: self.deviceId))
                print("\(info.deviceName ?? info.deviceId) (\(info.deviceId)) is \(info.status.rawValue).")
            }
        }
    }
}

extension WakeInfo {
    /// For the devices table: whether the device is woken when its app sleeps, and how the
    /// last wake went.
    var summary: String {
        switch (self.status, self.lastOutcome) {
        case (.gone, .refused): return "off until the app is opened again"
        case (.gone, _): return "off: the app is no longer registered with Apple"
        case (.active, .sent): return "on, woken " + (self.lastWakeAt?.formatted(date: .omitted, time: .shortened) ?? "")
        case (.active, .held): return "on, hourly limit reached"
        case (.active, .failed): return "on, last wake failed"
        default: return "on"
        }
    }
}

extension EnrollmentCode {
    /// The dashboard's sign-in page with the family and code filled in, on the gateway's
    /// preferred URL (none while the server has no gateway).
    var dashboardLink: String? {
        guard let url = self.urls?.first else { return nil }
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let encode = { (text: String) in text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text }
        return "\(url)/signin?family=\(encode(self.family))&code=\(encode(self.code))"
    }
}

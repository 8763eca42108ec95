import Logging
import SystemdKit
import Testing

@Suite("Journal field names")
struct JournalFieldTests {
    @Test("metadata keys map to valid journal field names, never dropped", arguments: [
        ("request_id", "REQUEST_ID"),
        ("requestId", "REQUEST_ID"),
        ("peer.uid", "PEER_UID"),
        ("durationUS", "DURATION_US"),
        ("message_id", "MESSAGE_ID"),
        ("1st", "F_1ST"),
        ("_secret", "F__SECRET"),
        ("", "F_"),
        ("zoné", "ZON_"),
        ("MESSAGE", "META_MESSAGE"),
        ("priority", "META_PRIORITY"),
    ])
    func mapping(key: String, field: String) {
        #expect(Journal.fieldName(for: key) == field)
    }

    @Test("names are cut at 64 characters")
    func length() {
        #expect(Journal.fieldName(for: String(repeating: "a", count: 100)).count == 64)
    }

    @Test("levels map to syslog priorities")
    func priorities() {
        #expect(Journal.priority(of: .critical) == 2)
        #expect(Journal.priority(of: .error) == 3)
        #expect(Journal.priority(of: .warning) == 4)
        #expect(Journal.priority(of: .notice) == 5)
        #expect(Journal.priority(of: .info) == 6)
        #expect(Journal.priority(of: .debug) == 7)
    }
}

import Testing

@testable import Janus
@testable import Signaling

@Suite("JanusRoomURL")
struct JanusRoomURLTests {
    @Test func parsesHostPortAndRoom() throws {
        let url = try JanusRoomURL("janus://127.0.0.1:8088/1234")
        #expect(url.room == 1234)
        #expect(url.api.host == "127.0.0.1" && url.api.port == 8088 && url.api.target == "/janus")
    }

    @Test func defaultsToPort80() throws {
        let url = try JanusRoomURL("janus://janus.local/7")
        #expect(url.api.port == 80 && url.room == 7)
    }

    @Test(arguments: [
        "http://127.0.0.1:8088/1234", "janus://127.0.0.1:8088", "janus://127.0.0.1:8088/",
        "janus://127.0.0.1:8088/room",
        "janus:///1234", "janus://127.0.0.1:8088/0", "janus://127.0.0.1:8088/-5", "janus://127.0.0.1:99999/1",
        "janus://127.0.0.1:8088/12/34",
    ])
    func refusesBadURLs(_ text: String) {
        #expect(throws: JanusError.badURL(text)) { try JanusRoomURL(text) }
    }
}

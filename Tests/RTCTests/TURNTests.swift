import Testing

@testable import RTC
@testable import RTCWire

@Suite struct ICEServerURLTests {
    @Test func parsesTurnURLsWithInlineCredentials() throws {
        let udp = try ICEServer(url: "turn:alice:s3cret@127.0.0.2:3479?transport=udp")
        #expect(
            udp == ICEServer(host: "127.0.0.2", port: 3479, transport: .udp, username: "alice", credential: "s3cret"))
        let tcp = try ICEServer(url: "turn:u:p@turn.example:3478?transport=tcp")
        #expect(tcp.transport == .tcp && tcp.host == "turn.example")
        let tls = try ICEServer(url: "turns:[::1]", username: "u", credential: "p:with:colons")
        #expect(tls.transport == .tls && tls.host == "::1" && tls.port == 5349 && tls.credential == "p:with:colons")
        #expect(tls.url == "turns:[::1]:5349?transport=tcp")
        let list = try ICEServer.parseList("turn:a:b@127.0.0.1, turns:a:b@127.0.0.1:5350")
        #expect(list.map(\.port) == [3478, 5350])
    }

    @Test func refusesWhatItCannotUse() {
        for bad in [
            "stun:127.0.0.1", "turn:127.0.0.1", "turn:u:p@127.0.0.1:0", "turn:u:p@127.0.0.1:99999",
            "turn:u:p@127.0.0.1?transport=sctp", "turns:u:p@h?transport=udp", "turn:up@h", "turn:u:p@",
        ] {
            #expect(throws: ICEServer.ParseError.self) { try ICEServer(url: bad) }
        }
    }

    @Test func longTermKeyIsMD5OfUserRealmPassword() {
        // hashlib.md5(b"alice:example.org:s3cret").digest()
        #expect(
            TURNClient.longTermKey(username: "alice", realm: "example.org", password: "s3cret") == [
                139, 131, 180, 12, 34, 144, 108, 12, 103, 163, 197, 188, 196, 145, 188, 20,
            ])
    }
}

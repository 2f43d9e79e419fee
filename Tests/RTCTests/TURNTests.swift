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

@Suite struct TURNClientHostileInputTests {
    @Test func garbageFromTheServerIsCountedNotTrusted() async throws {
        let loop = EventLoop(name: "turn-hostile")
        defer { loop.shutdown() }
        let server = ICEServer(host: "127.0.0.1", port: 3478, transport: .udp, username: "u", credential: "p")
        let client = TURNClient(server: server, serverAddress: SocketAddress(ip: "127.0.0.1", port: 3478)!, loop: loop)
        let counters = await loop.submit { () -> TURNCounters in
            var inputs: [[UInt8]] = [
                [0x40, 0x00, 0x00, 0x04, 1, 2, 3, 4],  // ChannelData on a channel never bound
                [0x40, 0x00, 0xFF, 0xFF, 1],  // ChannelData longer than the datagram
                [0x00, 0x17, 0x00, 0x00, 0x21, 0x12, 0xA4, 0x42] + [UInt8](repeating: 0, count: 12),  // empty Data indication
                [0x01, 0x03, 0x00, 0x00, 0x21, 0x12, 0xA4, 0x42] + [UInt8](repeating: 9, count: 12),  // unsolicited response
                [0xFF, 0x00, 0x00, 0x00],
            ]
            for i in inputs.indices {
                inputs[i].withUnsafeMutableBytes { client.linkReceived($0) }
            }
            return client.counters
        }
        #expect(counters.droppedMalformed == 5)
        #expect(counters.allocations == 0)
    }
}

import Foundation
import Signaling
import Testing

@testable import RoomServer

@Suite("RoomServer lifecycle, configuration and producer rules")
struct LifecycleAndLimitsTests {
    @Test func connectionWithoutJoinIsClosed() async throws {
        let server = try startServer { $0.joinTimeoutSeconds = 0.2 }
        defer { server.stop() }
        let idle = try await TestClient.connect(server, token: token(server))
        #expect(try await idle.closed() == 1008)
    }

    @Test func secondJoinOnOneConnectionIsRefusedAndTheConnectionStays() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (a, _) = try await TestClient.joined(server, participant: "alice")
        let error = try await a.expectError("join", ["roomId": "r1", "participantId": "alice2"])
        #expect(error.code == 3054)
        _ = try await a.request("ping").get()
    }

    @Test func stopClosesEveryRoom() async throws {
        let server = try startServer()
        let (a, _) = try await TestClient.joined(server, room: "one", participant: "alice")
        let (b, _) = try await TestClient.joined(server, room: "two", participant: "bob")
        server.stop()
        for client in [a, b] {
            #expect(try await client.notification("roomClosed")["reason"]?.intValue == 1006)
            _ = try await client.closed()
        }
        #expect(await server.roomSummaries().isEmpty)
    }

    @Test func producerRules() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (a, _) = try await TestClient.joined(server, participant: "alice")
        let (b, _) = try await TestClient.joined(server, participant: "bob", extra: ["mode": "RECV_ONLY"])
        let mic = try await a.request("produce", ["kind": "mic"]).get()
        #expect(try await a.expectError("produce", ["kind": "audio"]).code == 3058)
        _ = try await a.request("produce", ["kind": "screen"]).get()
        #expect(try await a.expectError("produce", ["kind": "share"]).code == 3061)
        #expect(try await a.expectError("produce", ["kind": "hologram"]).code == 3073)
        #expect(try await a.expectError("closeProducer", ["producerId": "pr-unknown"]).code == 3073)
        #expect(try await b.expectError("closeProducer", ["producerId": mic["producerId"] ?? nil]).code == 3066)
        // Another participant cannot share while alice presents.
        _ = try await b.request("changeMode", ["mode": "SEND_AND_RECV"]).get()
        #expect(try await b.expectError("produce", ["kind": "screen"]).code == 3061)
        // Leaving SEND_AND_RECV ends alice's presentation for everyone.
        _ = try await a.request("changeMode", ["mode": "SIGNALLING_ONLY"]).get()
        try await b.notification("presenterChanged") { $0["participantId"]?.isNull == true }
        _ = try await b.request("produce", ["kind": "screen"]).get()
        try await a.notification("presenterChanged") { $0["participantId"] == "bob" }
    }

    @Test func configurationFileKeepsDefaultsForAbsentKeys() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "room-config-\(UUID().uuidString).json"
        ).path
        try Data(#"{"listenPort": 9999, "maxParticipantsPerRoom": 7, "udpPortLow": 40000, "udpPortHigh": 40100}"#.utf8)
            .write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let configuration = try RoomServerConfiguration.load(path: path)
        #expect(configuration.listenPort == 9999)
        #expect(configuration.maxParticipantsPerRoom == 7)
        #expect(configuration.udpPortLow == 40000 && configuration.udpPortHigh == 40100)
        #expect(configuration.listenHost == "127.0.0.1")
        #expect(configuration.pubsubHistoryLimit == RoomServerConfiguration().pubsubHistoryLimit)
        #expect(configuration.validationProblem() == nil)
        var bad = configuration
        bad.udpPortLow = 50000
        #expect(bad.validationProblem() != nil)
        #expect(throws: RoomServerError.self) { try RoomServer(configuration: bad).start() }
    }

    @Test func theKeyFrameRequestIntervalReachesTheSFUAndIsBounded() throws {
        #expect(RoomServerConfiguration().keyframeRequestIntervalMilliseconds == 300)
        let c = try JSONDecoder().decode(
            RoomServerConfiguration.self, from: Data(#"{"keyframeRequestIntervalMilliseconds": 200}"#.utf8))
        #expect(c.keyframeRequestIntervalMilliseconds == 200)
        var configuration = c
        configuration.listenPort = 0
        configuration.secret = "test-secret"
        let server = RoomServer(configuration: configuration)
        try server.start()
        defer { server.stop() }
        #expect(server.media()?.sfu.configuration.keyframeRequestInterval == 200_000_000)
        for wrong in [0, 49, 10_001] {
            var bad = configuration
            bad.keyframeRequestIntervalMilliseconds = wrong
            #expect(bad.validationProblem()?.contains("keyframeRequestIntervalMilliseconds") == true)
            #expect(throws: RoomServerError.self) { try RoomServer(configuration: bad).start() }
        }
    }

    /// A port already taken is refused with the listener's own error kept as the cause.
    @Test func aTakenPortKeepsTheListenerErrorAsTheCause() throws {
        let first = try startServer()
        defer { first.stop() }
        var configuration = RoomServerConfiguration()
        configuration.listenPort = first.httpPort
        configuration.secret = "test-secret"
        let second = RoomServer(configuration: configuration)
        defer { second.stop() }
        do {
            try second.start()
            Issue.record("two servers listened on port \(first.httpPort)")
        } catch {
            guard case .listenFailed(_, let port, _) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(port == first.httpPort)
        }
    }

    @Test func generatedDevSecretSignsUsableTokens() async throws {
        var configuration = RoomServerConfiguration()
        configuration.listenPort = 0
        let server = RoomServer(configuration: configuration)
        #expect(server.secretWasGenerated)
        try server.start()
        defer { server.stop() }
        #expect(server.httpPort != 0)
        _ = try await TestClient.joined(server, participant: "alice")
    }
}

@Suite("RoomServer many participants")
struct ManyParticipantsTests {
    @Test func sixtyConcurrentJoinsAllSeeEachOther() async throws {
        let server = try startServer()
        defer { server.stop() }
        let count = 60
        let clients = try await withThrowingTaskGroup(of: TestClient.self) { group in
            for i in 0..<count {
                group.addTask { try await TestClient.joined(server, participant: "p\(i)").0 }
            }
            var all: [TestClient] = []
            for try await c in group { all.append(c) }
            return all
        }
        #expect(await server.roomSummaries().first?.participantCount == count)
        // Everyone learns about everyone else exactly once: before its join answer or after it.
        for client in clients {
            let deadline = Date().addingTimeInterval(10)
            while client.notifications("participantJoined").count < count - 1 && Date() < deadline {
                try await Task.sleep(nanoseconds: 10_000_000)
            }
            let ids = client.notifications("participantJoined").compactMap { $0["participantId"]?.stringValue }
            #expect(ids.count == count - 1)
            #expect(Set(ids).count == count - 1)
        }
    }
}

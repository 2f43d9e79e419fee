import Foundation
import RoomProtocol
import Signaling
import Testing

@testable import RoomServer

/// RoomServerConfiguration: the configuration file, its defaults and its bounds (`Configuration.swift`).
@Suite("RoomServerConfiguration")
struct ConfigurationTests {
    @Test func theHardeningLimitsComeFromTheConfigurationFile() throws {
        let json = #"""
            {"anyoneMayEnd": true, "maxTokenLifetimeSeconds": 60, "maxRooms": 3,
             "maxPubSubHistoryBytesPerRoom": 1000, "maxPubSubHistoryBytesTotal": 2000,
             "maxQueuedOutputBytes": 20000, "lobbyTimeoutSeconds": 5, "maxSSRCsPerPublisher": 8}
            """#
        let c = try JSONDecoder().decode(RoomServerConfiguration.self, from: Data(json.utf8))
        #expect(c.anyoneMayEnd && c.maxTokenLifetimeSeconds == 60 && c.maxRooms == 3)
        #expect(c.maxPubSubHistoryBytesPerRoom == 1000 && c.maxPubSubHistoryBytesTotal == 2000)
        #expect(c.maxQueuedOutputBytes == 20000 && c.lobbyTimeoutSeconds == 5 && c.maxSSRCsPerPublisher == 8)
        #expect(c.validationProblem() == nil)
        let d = RoomServerConfiguration()
        #expect(!d.anyoneMayEnd && d.udpPortLow == d.udpPortHigh && d.maxQueuedOutputBytes == 1024 * 1024)
        var tooSmall = d
        tooSmall.maxQueuedOutputBytes = 100
        #expect(tooSmall.validationProblem() != nil)
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
}

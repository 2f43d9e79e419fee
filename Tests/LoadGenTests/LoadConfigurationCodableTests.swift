import Foundation
import LoadGen
import RTC
import Testing

// Issue 34: a distributed load test sends each worker its share as a LoadConfiguration in JSON.

@Suite struct LoadConfigurationCodableTests {
    @Test func aConfigurationReadsBackAsWritten() throws {
        var c = LoadConfiguration(signalingURL: "ws://h:1", room: "r")
        c.rooms = 3
        c.token = "T"
        c.publishers = 2
        c.audioPublishers = 1
        c.subscribers = 40
        c.duration = 12.5
        c.waitForMediaUntil = 30
        c.joinRate = 2.5
        c.layout = .grid(4)
        c.simulcast = false
        c.inviteEvery = 5
        c.loopCount = 2
        c.requestTimeout = 7
        c.idPrefix = "w1-"
        c.videoCodec = .fixed(.h264)
        c.iceServers = [try ICEServer(url: "turn:u:p@10.0.0.1:3478?transport=tcp")]
        c.impair = "lossy-wifi"
        c.impairShare = 0.3
        c.qualityMetrics = false
        c.reconnectWindow = 20
        c.expectParticipants = 453
        let read = try JSONDecoder().decode(LoadConfiguration.self, from: JSONEncoder().encode(c))
        #expect(read == c)
        // Absent fields keep their defaults.
        let minimal = try JSONDecoder().decode(
            LoadConfiguration.self, from: Data(#"{"signalingURL":"ws://h:1","room":"r","secret":"s"}"#.utf8))
        #expect(minimal.subscribers == 10 && minimal.layout == .grid(3) && minimal.duration == 60)
        #expect(minimal.videoCodec == .fixed(.vp8))
        #expect(minimal.qualityMetrics)
        #expect(minimal.reconnectWindow == nil && minimal.expectParticipants == nil)
        // `auto` travels as such (a fleet job carries it to every worker).
        c.videoCodec = .auto
        #expect(try JSONDecoder().decode(LoadConfiguration.self, from: JSONEncoder().encode(c)).videoCodec == .auto)
    }

    @Test func theImpairShareSpreadsEvenlyWithASeedPerBot() throws {
        var c = LoadConfiguration(signalingURL: "ws://h:1", room: "r")
        c.secret = "s"
        c.impair = "3g"
        c.impairShare = 0.1
        try c.validate()
        let impaired = (0..<200).compactMap { c.impairment(forBot: $0) }
        #expect(impaired.count == 20)
        #expect(Set(impaired.map(\.seed)).count == 20)
        #expect(impaired.allSatisfy { $0.withSeed(1) == Impairment.preset(named: "3g") })
        // Evenly: never two impaired bots in a row at a tenth, one in each block of ten.
        let indices = (0..<200).filter { c.impairment(forBot: $0) != nil }
        #expect(zip(indices, indices.dropFirst()).allSatisfy { $1 - $0 == 10 })
        c.impairShare = 1
        #expect((0..<50).allSatisfy { c.impairment(forBot: $0) != nil })
        c.impairShare = 0
        #expect((0..<50).allSatisfy { c.impairment(forBot: $0) == nil })
        c.impairShare = 1.5
        #expect(throws: LoadError.self) { try c.validate() }
        c.impairShare = 1
        c.impair = #"{"down": {"jitterMs": "lots"}}"#
        #expect {
            try c.validate()
        } throws: { "\($0)".contains("down.jitterMs") }
    }

    @Test func decodingValidates() {
        for text in [
            #"{"signalingURL":"http://h:1","room":"r","secret":"s"}"#,
            #"{"signalingURL":"ws://h:1","room":"r"}"#,
            #"{"signalingURL":"ws://h:1","room":"r","secret":"s","duration":0}"#,
            #"{"signalingURL":"ws://h:1","room":"r","secret":"s","loopCount":0}"#,
            #"{"signalingURL":"ws://h:1","room":"r","secret":"s","layout":"speakers"}"#,
            #"{"signalingURL":"ws://h:1","room":"r","secret":"s","iceServers":[{"url":"stun:h","username":"u","credential":"p"}]}"#,
            #"{"signalingURL":"ws://h:1","room":"r","secret":"s","videoCodec":"vp7"}"#,
            #"{"signalingURL":"ws://h:1","room":"r","secret":"s","qualityMetrics":"off"}"#,
            #"{"signalingURL":"ws://h:1","room":"r","secret":"s","videoCodec":"opus"}"#,
            #"{"signalingURL":"ws://h:1","room":"r","secret":"s","reconnectWindow":0}"#,
            #"{"signalingURL":"ws://h:1","room":"r","secret":"s","reconnectWindow":-3}"#,
            #"{"signalingURL":"ws://h:1","room":"r","secret":"s","reconnectWindow":1e9}"#,
            #"{"signalingURL":"ws://h:1","room":"r","secret":"s","reconnectWindow":"30s"}"#,
            #"{"signalingURL":"ws://h:1","room":"r","secret":"s","expectParticipants":0}"#,
        ] {
            #expect(throws: DecodingError.self, "\(text)") {
                try JSONDecoder().decode(LoadConfiguration.self, from: Data(text.utf8))
            }
        }
    }

    @Test func theReconnectWindowIsValidated() throws {
        var c = LoadConfiguration(signalingURL: "ws://h:1", room: "r")
        c.secret = "s"
        for bad in [0, -1, 86401, Double.nan, Double.infinity] {
            c.reconnectWindow = bad
            #expect(throws: LoadError.self, "\(bad)") { try c.validate() }
        }
        c.reconnectWindow = 0.5
        try c.validate()
        c.expectParticipants = 0
        #expect(throws: LoadError.self) { try c.validate() }
    }
}

import Agent
import Foundation
import LoadGen
import Redis
import RoomProtocol
import RoomServer
import Signaling
import Testing

@testable import Fleet

@Suite struct DistributedLoadSplitTests {
    @Test func sharesAddUpAndFollowTheWeights() {
        let plan = DistributedLoad.Plan(publishers: 3, audioPublishers: 1, subscribers: 101, joinRate: 50, duration: 10)
        let shares = DistributedLoad.split(plan, weights: [("a", 100), ("b", 300)])
        #expect(shares.map(\.worker) == ["a", "b"])
        #expect(shares.reduce(0) { $0 + $1.publishers } == 3)
        #expect(shares.reduce(0) { $0 + $1.audioPublishers } == 1)
        #expect(shares.reduce(0) { $0 + $1.subscribers } == 101)
        // 101 × 1/4 = 25.25 and 101 × 3/4 = 75.75: the remainder goes to the larger fraction.
        #expect(shares[0].subscribers == 25 && shares[1].subscribers == 76)
    }

    @Test func aFullWorkerStillGetsTheSmallestShareInsteadOfDividingByZero() {
        let plan = DistributedLoad.Plan(publishers: 0, audioPublishers: 0, subscribers: 10, joinRate: 5, duration: 1)
        let shares = DistributedLoad.split(plan, weights: [("full", 0), ("free", -3)])
        #expect(shares.map(\.subscribers) == [5, 5])
    }
}

@Suite struct LoadAssignmentTests {
    @Test func aShareReadsBackAsSentAndTakesTheWorkersThreadsUnlessGiven() throws {
        var share = LoadConfiguration(signalingURL: "ws://h:1", room: "r")
        share.secret = "s"
        share.subscribers = 7
        share.layout = .speaker
        share.idPrefix = "w1-"
        share.loopCount = 3
        let sent = LoadAssignment(test: "load-1", configuration: share, threads: nil)
        let read = try LoadAssignment.parse(RedisJSON.encode(sent))
        #expect(read.configuration.subscribers == 7 && read.configuration.layout == .speaker)
        #expect(read.configuration.idPrefix == "w1-")
        #expect(read.configuration.loopCount == LoadConfiguration(signalingURL: "ws://h:1", room: "r").loopCount)
        let given = try LoadAssignment.parse(
            RedisJSON.encode(LoadAssignment(test: "load-1", configuration: share, threads: 2)))
        #expect(given.configuration.loopCount == 2)
    }

    @Test func aHostileShareIsRefused() {
        for text in [
            "", "{", #"{"test":"../x","configuration":{"signalingURL":"ws://h:1","room":"r","secret":"s"}}"#,
            #"{"test":"t","configuration":{"signalingURL":"ws://h:1","room":"r"}}"#,
            #"{"test":"t","configuration":{"signalingURL":"ws://h:1","room":"r","secret":"s","requestTimeout":-1}}"#,
            #"{"test":"t","configuration":{"signalingURL":"ws://h:1","room":"r","secret":"s","subscribers":1e9}}"#,
            #"{"test":"t","configuration":{"signalingURL":"ws://h:1","room":"r","secret":"s","idPrefix":"a/b"}}"#,
            #"{"test":"t","configuration":{"signalingURL":"ws://h:1","room":"r","secret":"s","layout":"9x9"}}"#,
        ] {
            #expect(throws: FleetRecordError.self, "\(text)") { try LoadAssignment.parse(text) }
        }
    }
}

import Agent
import Foundation
import Redis
import Testing

@testable import Fleet

// Issue 31: what a worker and `jobs list` read from Redis is untrusted input: `FleetJobID` and
// `FleetRecords` read it.

@Suite struct FleetRecordsTests {
    @Test func theGrammarIsLettersDigitsDotUnderscoreDashUpTo64() {
        for good in ["a", "rec-1", "standup.rec_2", String(repeating: "x", count: 64), "...", ".a"] {
            #expect(FleetJobID.isValid(good), "\(good)")
        }
        for bad in ["", ".", "..", "a/b", "../x", "/abs", "ü", "a b", "a\u{0}", String(repeating: "x", count: 65)] {
            #expect(!FleetJobID.isValid(bad), "\(bad)")
        }
    }

    @Test func aStreamEntryNamesAJobOnlyWithAValidId() {
        #expect(FleetRecords.jobId(entryFields: ["job", "rec-1"]) == "rec-1")
        #expect(FleetRecords.jobId(entryFields: ["job", ".."]) == nil)
        #expect(FleetRecords.jobId(entryFields: ["job", nil]) == nil)
        #expect(FleetRecords.jobId(entryFields: ["other", "x"]) == nil)
        #expect(FleetRecords.jobId(entryFields: ["job"]) == nil)
    }

    @Test func aStatusRecordMustNameItsOwnValidJob() throws {
        let spec = job("a", cost: 2, submittedAt: 1)
        let status = FleetJobStatus(spec: spec, state: .queued, worker: nil, attempts: [], error: nil, updatedAt: 1)
        let text = RedisJSON.encode(status)
        #expect(try FleetRecords.status(text, jobId: "a") == status)
        #expect(throws: FleetRecordError.self) { try FleetRecords.status(text, jobId: "b") }
        #expect(throws: FleetRecordError.self) { try FleetRecords.status("{", jobId: "a") }
        var escaping = status
        escaping.spec.id = ".."
        #expect(throws: FleetRecordError.self) { try FleetRecords.status(RedisJSON.encode(escaping), jobId: "..") }
        var free = status
        free.spec.cost = 0
        #expect(throws: FleetRecordError.self) { try FleetRecords.status(RedisJSON.encode(free), jobId: "a") }
    }

    @Test func shownStatusesCarryNoSecrets() {
        var agent = AgentJobOptions(server: "http://h:1", room: "r", token: "SECRET-TOKEN")
        agent.iceServers = "turn:u:TURN-PASSWORD@h:3478"
        agent.relayRoom = "other"
        agent.relayRoomToken = "RELAY-TOKEN"
        agent.consume = "all"
        let status = FleetJobStatus(
            spec: FleetJobSpec(id: "a", agent: agent, cost: 2, submittedAt: 1), state: .queued, worker: nil,
            attempts: [], error: nil, updatedAt: 1)
        let shown = FleetStore.encodeForDisplay([status])
        for secret in ["SECRET-TOKEN", "TURN-PASSWORD", "RELAY-TOKEN"] { #expect(!shown.contains(secret)) }
        #expect(status.redacted.spec.agent.consume == "all")
        #expect(status.redacted.spec.agent.token == "[redacted]")
        #expect(status.redacted.spec.agent.iceServers == "[redacted]")
    }

    @Test func aStatusRecordWhoseAgentOptionsAreNotValidIsRefused() throws {
        let good = FleetJobStatus(
            spec: job("a", cost: 2, submittedAt: 1), state: .queued, worker: nil, attempts: [], error: nil,
            updatedAt: 1)
        #expect(try FleetRecords.status(RedisJSON.encode(good), jobId: "a") == good)
        var bad: [FleetJobStatus] = []
        for change in [
            { (o: inout AgentJobOptions) in o.server = "ftp://h" }, { $0.consume = "," }, { $0.mode = "LOUD" },
            { $0.token = "" }, { $0.duration = -1 }, { $0.relayRoom = "r" }, { $0.recordFormat = "avi" },
            { $0.consumeKinds = "smell" }, { $0.maxVideo = -2 },
        ] as [(inout AgentJobOptions) -> Void] {
            var status = good
            change(&status.spec.agent)
            bad.append(status)
        }
        var otherRoom = good
        otherRoom.spec.room = "elsewhere"
        bad.append(otherRoom)
        for status in bad {
            #expect(throws: FleetRecordError.self, "\(status.spec.agent)") {
                try FleetRecords.status(RedisJSON.encode(status), jobId: "a")
            }
        }
        // The record shape before typed jobs (join arguments) is refused with a clear reason.
        let old =
            #"{"attempts":[],"spec":{"cost":2,"id":"a","joinArguments":["--room","r"],"room":"r","submittedAt":1},"state":"queued","updatedAt":1}"#
        #expect(throws: FleetRecordError.self) { try FleetRecords.status(old, jobId: "a") }
    }
}

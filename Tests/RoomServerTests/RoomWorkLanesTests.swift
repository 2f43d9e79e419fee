import Foundation
import RoomProtocol
import Signaling
import Testing

@testable import RoomServer

/// The order in which a room runs requests and subscribe renegotiations (``RoomWorkLanes``).
@Suite("Room work lanes")
struct RoomWorkLanesTests {
    final class Log: @unchecked Sendable {
        private let lock = NSLock()
        private var entries: [String] = []
        func add(_ entry: String) { lock.withLock { entries.append(entry) } }
        var all: [String] { lock.withLock { entries } }
    }

    final class Session {}

    /// Runs every waiting job the way the room's queue does (one `next()` per submission).
    static func drain(_ lanes: RoomWorkLanes, _ log: Log) {
        while !lanes.isEmpty {
            switch lanes.next() {
            case .request(let work): work()
            case .sharingSFUCall(let requests):
                log.add("shared " + requests.map(\.id.description).joined(separator: ","))
            case .renegotiations(let ids): log.add("offer " + ids.joined(separator: ","))
            case .nothing: break
            }
        }
    }

    @Test func aStageRequestGoesAheadOfOtherMembersRequestsAndRenegotiations() {
        let lanes = RoomWorkLanes()
        let log = Log()
        let audience = (0..<5).map { _ in Session() }
        let guest = Session()
        for (i, s) in audience.enumerated() {
            lanes.submit(session: ObjectIdentifier(s), method: .consume) { log.add("consume \(i)") }
            _ = lanes.submitRenegotiation("member-\(i)")
        }
        lanes.submit(session: ObjectIdentifier(guest), method: .changeMode) { log.add("changeMode") }
        lanes.submit(session: ObjectIdentifier(guest), method: .produce) { log.add("produce") }
        Self.drain(lanes, log)
        #expect(log.all.prefix(2) == ["changeMode", "produce"])
        #expect(log.all.dropFirst(2).prefix(5) == ["consume 0", "consume 1", "consume 2", "consume 3", "consume 4"])
        #expect(log.all.last == "offer member-0,member-1,member-2,member-3,member-4")
    }

    /// A member's signalling as the lanes see it: only its identity matters here.
    final class Member: ParticipantSignaling, @unchecked Sendable {
        var participantId: String? { nil }
        var isClosed: Bool { false }
        var renegotiatesSubscriptions: Bool { true }
        func send(_ envelope: SignalEnvelope) {}
        func send(_ message: PreparedTextMessage) {}
        func assign(room: Room) {}
        func markJoined(participantId: String) {}
        func close(code: UInt16, reason: String) {}
        func noteBadMessage() {}
    }

    static func submitShared(_ lanes: RoomWorkLanes, _ log: Log, _ member: Member, _ method: RoomMethod, _ name: String)
    {
        let request = RoomWorkLanes.SharedRequest(session: member, id: .string(name), method: method, data: [:])
        lanes.submit(session: ObjectIdentifier(member), method: method, shared: request) { log.add("alone " + name) }
    }

    @Test func membersShareableRequestsInARowShareAnSFUCallAndEachMembersKeepTheirOrder() {
        let lanes = RoomWorkLanes(sharedCallBatch: 3)
        let log = Log()
        let (a, b, c, d, e) = (Member(), Member(), Member(), Member(), Member())
        Self.submitShared(lanes, log, a, .consume, "a1")
        Self.submitShared(lanes, log, b, .consume, "b1")
        // b's second consume may depend on its first: it never shares that one's call.
        Self.submitShared(lanes, log, b, .consume, "b2")
        Self.submitShared(lanes, log, c, .consume, "c1")
        Self.submitShared(lanes, log, d, .subscriberAnswer, "d1")
        lanes.submit(session: ObjectIdentifier(e), method: .getStats) { log.add("alone e1") }
        (0..<4).forEach { Self.submitShared(lanes, log, Member(), .subscriberAnswer, "x\($0)") }
        Self.submitShared(lanes, log, e, .consume, "e2")
        Self.drain(lanes, log)
        #expect(
            log.all == [
                "shared \"a1\",\"b1\"", "shared \"b2\",\"c1\",\"d1\"", "alone e1", "shared \"x0\",\"x1\",\"x2\"",
                "shared \"x3\",\"e2\"",
            ])
    }

    /// An invite's burst interleaves every member's consume, answer and setViewPort: they share calls
    /// whatever their methods, one request per member each (a member's next one waits for the next call).
    @Test func anInvitesInterleavedConsumesAnswersAndViewportsShareCalls() {
        let lanes = RoomWorkLanes(sharedCallBatch: 16)
        let log = Log()
        let members = (0..<6).map { _ in Member() }
        for (i, m) in members.enumerated() {
            Self.submitShared(lanes, log, m, i % 2 == 0 ? .consume : .subscriberAnswer, "m\(i)a")
        }
        for (i, m) in members.enumerated() { Self.submitShared(lanes, log, m, .setViewPort, "m\(i)b") }
        Self.drain(lanes, log)
        #expect(
            log.all == [
                "shared " + (0..<6).map { "\"m\($0)a\"" }.joined(separator: ","),
                "shared " + (0..<6).map { "\"m\($0)b\"" }.joined(separator: ","),
            ])
    }

    @Test func aParticipantsRequestsKeepTheirOrderAndAStageRequestTakesItsEarlierOnesAlong() {
        let lanes = RoomWorkLanes()
        let log = Log()
        let (other, guest, host) = (Session(), Session(), Session())
        lanes.submit(session: ObjectIdentifier(other), method: .consume) { log.add("other consume") }
        lanes.submit(session: ObjectIdentifier(guest), method: .subscriberAnswer) { log.add("guest answer") }
        lanes.submit(session: ObjectIdentifier(other), method: .setViewPort) { log.add("other setViewPort") }
        lanes.submit(session: ObjectIdentifier(guest), method: .consume) { log.add("guest consume") }
        // The guest's changeMode does not overtake its own answer and consume: it takes them along,
        // ahead of the other member's requests, behind the stage request already waiting.
        lanes.submit(session: ObjectIdentifier(host), method: .publish) { log.add("host publish") }
        lanes.submit(session: ObjectIdentifier(guest), method: .changeMode) { log.add("guest changeMode") }
        // Nothing of the guest waits in the requests lane any more: its next request takes it as usual.
        lanes.submit(session: ObjectIdentifier(guest), method: .getStats) { log.add("guest getStats") }
        Self.drain(lanes, log)
        #expect(
            log.all == [
                "host publish", "guest answer", "guest consume", "guest changeMode", "other consume",
                "other setViewPort", "guest getStats",
            ])
    }

    @Test func oneRenegotiationPerMemberHoweverOftenItIsAsked() {
        let lanes = RoomWorkLanes()
        #expect(lanes.submitRenegotiation("a"))
        #expect(!lanes.submitRenegotiation("a"))
        #expect(lanes.submitRenegotiation("b"))
        guard case .renegotiations(let ids) = lanes.next() else {
            Issue.record("expected the renegotiations")
            return
        }
        #expect(ids == ["a", "b"])
        // Taken: a later change asks again.
        #expect(lanes.submitRenegotiation("a"))
    }

    @Test func aMembersOwnRenegotiationGoesAheadOfRequestsAndTheFanOut() {
        let lanes = RoomWorkLanes()
        let log = Log()
        let other = Session()
        for i in 0..<3 { _ = lanes.submitRenegotiation("audience-\(i)") }  // a stage change's fan-out
        lanes.submit(session: ObjectIdentifier(other), method: .consume) { log.add("consume") }
        #expect(lanes.submitRenegotiation("joiner"))
        lanes.expediteRenegotiation("joiner")
        lanes.expediteRenegotiation("nobody")  // nothing waiting: nothing to expedite
        Self.drain(lanes, log)
        #expect(log.all == ["offer joiner", "consume", "offer audience-0,audience-1,audience-2"])
    }

    /// A stage change asks every member for a new offer; each member then sends a request of its own
    /// (a stopConsuming, an answer). Those renegotiations were not caused by the requests: they stay in
    /// the bulk and go out in one batch, not one job (one SFU hop, one edge round trip) per member.
    @Test func aFanOutAskedBeforeAMembersRequestStaysInTheBulk() {
        let lanes = RoomWorkLanes()
        let log = Log()
        let members = (0..<4).map { _ in Session() }
        for i in 0..<4 { _ = lanes.submitRenegotiation("m\(i)") }  // the old guest's tracks closed
        for (i, s) in members.enumerated() {
            lanes.submit(session: ObjectIdentifier(s), method: .stopConsuming) { log.add("stop \(i)") }
        }
        // Each request runs, then expedites its member's renegotiation if the request asked for it.
        var ran = 0
        while !lanes.isEmpty {
            let mark = lanes.mark
            switch lanes.next() {
            case .request(let work):
                work()
                if ran == 2 { _ = lanes.submitRenegotiation("m2") }  // m2's own request changed its consumers
                lanes.expediteRenegotiation("m\(ran)", askedSince: mark)
                ran += 1
            case .renegotiations(let ids): log.add("offer " + ids.joined(separator: ","))
            default: break
            }
        }
        #expect(log.all == ["stop 0", "stop 1", "stop 2", "offer m2", "stop 3", "offer m0,m1,m3"])
    }

    @Test func anExpeditedRenegotiationRunsOnceWhicheverLaneReachesItFirst() {
        let lanes = RoomWorkLanes()
        let log = Log()
        _ = lanes.submitRenegotiation("a")
        _ = lanes.submitRenegotiation("b")
        lanes.expediteRenegotiation("b")
        // The batch takes a and b; b's expedited entry is then stale.
        guard case .renegotiations(let first) = lanes.next() else {
            Issue.record("expected b first")
            return
        }
        #expect(first == ["b"])
        #expect(lanes.submitRenegotiation("b"), "asked again after it ran")
        Self.drain(lanes, log)
        #expect(log.all == ["offer a,b"])
        #expect(lanes.isEmpty)
    }

    @Test func renegotiationsAreNotStarvedByAStreamOfRequests() {
        let lanes = RoomWorkLanes(renegotiationBatch: 16, renegotiationEvery: 4)
        let log = Log()
        let sessions = (0..<12).map { _ in Session() }
        for i in 0..<3 { _ = lanes.submitRenegotiation("m\(i)") }
        for (i, s) in sessions.enumerated() {
            lanes.submit(session: ObjectIdentifier(s), method: .consume) { log.add("r\(i)") }
        }
        Self.drain(lanes, log)
        #expect(
            log.all == [
                "r0", "r1", "r2", "r3", "offer m0", "r4", "r5", "r6", "r7", "offer m1", "r8", "r9", "r10", "r11",
                "offer m2",
            ])
    }

    @Test func theQueueNeverRunsDryWhileWorkWaits() {
        // One job per submission (a duplicate renegotiation submits none); batches leave jobs empty-handed.
        let lanes = RoomWorkLanes(renegotiationBatch: 8, renegotiationEvery: 2)
        var jobs = 0
        let sessions = (0..<6).map { _ in Session() }
        for round in 0..<20 {
            let s = sessions[round % sessions.count]
            lanes.submit(session: ObjectIdentifier(s), method: round % 3 == 0 ? .changeMode : .consume) {}
            jobs += 1
            if lanes.submitRenegotiation("m\(round % 7)") { jobs += 1 }
            if round % 5 == 0 { lanes.expediteRenegotiation("m\((round + 3) % 7)") }
            if round % 4 == 3 {
                // Some jobs run in between.
                for _ in 0..<3 where jobs > 0 {
                    _ = lanes.next()
                    jobs -= 1
                }
            }
        }
        while jobs > 0 {
            _ = lanes.next()
            jobs -= 1
        }
        #expect(lanes.isEmpty)
    }

    @Test func fifoKeepsOrderAcrossCompaction() {
        var fifo = FIFO<Int>()
        var expected = 0
        for i in 0..<5000 {
            fifo.append(i)
            if i % 3 != 0, let v = fifo.popFirst() {
                #expect(v == expected)
                expected += 1
            }
        }
        while let v = fifo.popFirst() {
            #expect(v == expected)
            expected += 1
        }
        #expect(expected == 5000)
        #expect(fifo.isEmpty)
    }
}

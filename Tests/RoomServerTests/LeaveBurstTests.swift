import Dispatch
import Foundation
import Signaling
import Testing

@testable import RoomServer

/// The members of an edge that died leave the origin's room together; their leaves go to everyone
/// in a message or two, not one each (N² sends that held up their own rejoins behind them).
@Suite struct LeaveBurstTests {
    @Test func aBurstOfLeavesSharesOneMessage() async throws {
        let server = try startServer { $0.participantEventWindowMilliseconds = 1000 }
        defer { server.stop() }
        let (watcher, _) = try await ParticipantEventsTests.join2(server, "watcher", mode: "RECV_ONLY")
        var leavers: [TestClient] = []
        for i in 1...8 { leavers.append(try await ParticipantEventsTests.join2(server, "m\(i)", mode: "RECV_ONLY").0) }
        let room = try #require(server.existingRoom("r1"))
        // Hold the room's queue until all eight leaves wait in it, as a dead node's members' do.
        let gate = DispatchSemaphore(value: 0)
        room.enqueue { gate.wait() }
        for leaver in leavers { _ = leaver.sendRequest("leave") }
        let deadline = Date().addingTimeInterval(20)
        while room.waitingRequestCount < leavers.count && Date() < deadline {
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        #expect(room.waitingRequestCount == leavers.count)
        gate.signal()

        func leaveMessages() -> [[String]] {
            watcher.messages.compactMap { message -> [String]? in
                guard case .notification("participantEvents", let data) = message else { return nil }
                let left = (data["events"]?.arrayValue ?? []).filter { $0["method"]?.stringValue == "participantLeft" }
                return left.isEmpty ? nil : left.compactMap { $0["data"]?["participantId"]?.stringValue }
            }
        }
        while leaveMessages().joined().count < leavers.count && Date() < deadline {
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        #expect(leaveMessages().joined().sorted() == (1...8).map { "m\($0)" })
        // The first may go out alone (a quiet window before it); the rest share one (one each before).
        #expect(leaveMessages().count <= 2, "\(leaveMessages())")
    }
}

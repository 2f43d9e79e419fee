import Foundation
import RTCWire
import RoomProtocol
import Signaling
import Testing

@testable import RoomServer

/// The room's `roomVideoCodecs` (docs/protocol.md "Video codecs a room accepts"): the intersection of
/// its receivers' declarations, an undeclared join counting as VP8 only.
@Suite("Room video codecs")
struct RoomVideoCodecsTests {
    @Test func theIntersectionFollowsReceiversComingAndGoing() {
        var room = RoomVideoCodecs()
        #expect(room.accepted == MediaCodec.videoCodecs)  // nobody refuses anything yet
        room.add(MediaCodec.videoCodecs)
        #expect(room.accepted == [.vp8, .h264, .vp9, .av1])
        room.add([.h264, .vp8])
        #expect(room.accepted == [.vp8, .h264])
        room.add([.vp8])
        #expect(room.accepted == [.vp8])
        room.add([.av1])
        #expect(room.accepted == [])
        room.remove([.av1])
        room.remove([.vp8])
        #expect(room.accepted == [.vp8, .h264])
        room.remove([.h264, .vp8])
        room.remove(MediaCodec.videoCodecs)
        #expect(room.receivers == 0 && room.accepted == MediaCodec.videoCodecs)
    }

    @Test func codecNamesAreReadInAnyCaseAndUnknownOnesLeftOut() {
        #expect(MediaCodec.videoCodecs(named: ["H264", "red", "VP8", "h265", "vp8", "opus"]) == [.vp8, .h264])
        #expect(MediaCodec.videoCodecs(named: []) == [])
    }

    @Test func autoPrefersH264ThenVP8AndFallsBackToVP8() {
        #expect(VideoCodecChoice.auto.resolve(roomVideoCodecs: [.vp8, .h264]) == .h264)
        #expect(VideoCodecChoice.auto.resolve(roomVideoCodecs: [.vp8]) == .vp8)
        #expect(VideoCodecChoice.auto.resolve(roomVideoCodecs: [.vp8, .vp9, .av1]) == .vp8)
        #expect(VideoCodecChoice.auto.resolve(roomVideoCodecs: [.av1, .vp9]) == .vp9)
        #expect(VideoCodecChoice.auto.resolve(roomVideoCodecs: []) == .vp8)
        #expect(VideoCodecChoice.fixed(.av1).resolve(roomVideoCodecs: [.vp8]) == .av1)
    }

    @Test func theOptionParsesEveryDocumentedValueAndNothingElse() {
        #expect(VideoCodecChoice.parse(nil) == .fixed(.vp8))
        #expect(VideoCodecChoice.parse(nil, fallback: .auto) == .auto)
        #expect(VideoCodecChoice.parse("AUTO") == .auto)
        #expect(VideoCodecChoice.parse("H.264") == .fixed(.h264))
        for codec in MediaCodec.videoCodecs {
            #expect(VideoCodecChoice.parse(codec.rawValue) == .fixed(codec))
            #expect(VideoCodecChoice.parse(VideoCodecChoice.fixed(codec).description) == .fixed(codec))
        }
        for bad in ["", "vp7", "opus", "auto ", "h265"] { #expect(VideoCodecChoice.parse(bad) == nil, "\(bad)") }
    }

    @Test func joinsDeclareAndEveryoneHearsTheRoomsChange() async throws {
        let server = try startServer()
        defer { server.stop() }
        let all: JSONValue = ["vp8", "h264", "vp9", "av1"]
        let (agent, first) = try await TestClient.joined(server, participant: "agent", extra: ["videoCodecs": all])
        #expect(first["roomVideoCodecs"] == all)
        let (page, second) = try await TestClient.joined(
            server, participant: "page", extra: ["videoCodecs": ["VP8", "H264", "red"]])
        #expect(second["roomVideoCodecs"] == ["vp8", "h264"])
        let changed = try await agent.notification("roomVideoCodecsChanged")
        #expect(changed["roomVideoCodecs"] == ["vp8", "h264"])
        #expect(page.notifications("roomVideoCodecsChanged").isEmpty)  // its join response had it

        // A client that declares nothing counts as VP8 only.
        let (old, third) = try await TestClient.joined(server, participant: "old")
        #expect(third["roomVideoCodecs"] == ["vp8"])
        _ = try await agent.notification("roomVideoCodecsChanged") { $0["roomVideoCodecs"] == ["vp8"] }
        // A signalling-only participant receives no media: it does not count.
        _ = try await old.request("changeMode", ["mode": "SIGNALLING_ONLY"]).get()
        _ = try await page.notification("roomVideoCodecsChanged") { $0["roomVideoCodecs"] == ["vp8", "h264"] }
        _ = try await old.request("changeMode", ["mode": "RECV_ONLY"]).get()
        _ = try await page.notification("roomVideoCodecsChanged") { $0["roomVideoCodecs"] == ["vp8"] }
        _ = try await old.request("leave").get()
        let back = try await agent.notification("roomVideoCodecsChanged") { $0["roomVideoCodecs"] == ["vp8", "h264"] }
        #expect(back["roomVideoCodecs"] == ["vp8", "h264"])
    }

    @Test func aMalformedDeclarationIsRefused() async throws {
        let server = try startServer()
        defer { server.stop() }
        for bad: JSONValue in ["vp8", [1, 2], .array(Array(repeating: "vp8", count: 65))] {
            let client = try await TestClient.connect(server, token: token(server, room: "r1", participant: nil))
            let error = try await client.expectError(
                "join", ["roomId": "r1", "participantId": "x", "videoCodecs": bad])
            #expect(error.code == 3073, "\(bad)")
        }
    }
}

import Foundation
import Media
import RTCWire
import RoomServer
import SDKTestSupport
import TestSupport
import Testing

@testable import Understudy

/// `getTransportStats()` on a global queue (it waits for the server).
func transportStats(_ p: Participant) async -> [String: Any]? {
    let box = UncheckedSendable(p)
    let result: UncheckedSendable<[String: Any]?> = await withCheckedContinuation { c in
        DispatchQueue.global().async { c.resume(returning: UncheckedSendable(box.value.getTransportStats())) }
    }
    return result.value
}

@Suite("Understudy stats", .serialized)
struct StatsTests {
    @Test func statsAreDeltasWithOneRowPerLayerAndTheDocumentedFields() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (pub, _) = try await joinedRoom(
            server, room: "stats", id: "pub", mode: .SEND_AND_RECV, cam: true, multiStream: true)
        let (viewer, _) = try await joinedRoom(server, room: "stats", id: "viewer", mode: .RECV_ONLY)
        let remote = try #require(viewer.participants["pub"])
        try await waitForStream(remote, .video)

        // Each row covers the sampling clock's last interval (about a second), not a running total.
        try await waitUntil("packets flow", seconds: 20) {
            (remote.getVideoStats()?.first?["totalPackets"] as? Int ?? 0) > 0
        }
        let first = try #require(remote.getVideoStats()?.first)
        let firstPackets = first["totalPackets"] as? Int ?? 0
        #expect(firstPackets > 10)
        #expect(firstPackets < 400, "one interval, not the total: \(firstPackets)")
        for key in ["jitter", "bitrate", "totalPackets", "packetsLost", "rtt", "codec", "size"] {
            #expect(first[key] != nil, "missing \(key)")
        }
        #expect(first["codec"] as? String == "vp8")
        let size = try #require(first["size"] as? [String: Any])
        let width = size["width"] as? Int ?? 0
        #expect([640, 320, 160].contains(width), "size \(size)")
        #expect(width * 9 == (size["height"] as? Int ?? 0) * 16)
        #expect((size["framerate"] as? Double ?? 0) > 0, "framerate is known from the second sample on")
        // No mic: an empty array, not nil.
        #expect(remote.getAudioStats()?.isEmpty == true)

        // The local webcam: one row per layer it sends, each with its own size.
        try await waitUntil("local rows", seconds: 20) { pub.localParticipant.getVideoStats()?.count == 3 }
        let local = try #require(pub.localParticipant.getVideoStats())
        let widths = Set(local.compactMap { ($0["size"] as? [String: Any])?["width"] as? Int })
        #expect(widths == [640, 320, 160])

        // Transport: blocking, so called off the cooperative pool as docs/spec/participant-methods.md advises.
        let remoteTransport = try #require(await transportStats(remote))
        let remoteSend = try #require(remoteTransport["send"] as? [String: Any])
        #expect((remoteSend["totalSentBytes"] as? Int ?? 0) > 0)
        #expect(remoteTransport["receive"] is [String: Any])
        let localTransport = try #require(await transportStats(pub.localParticipant))
        let localSend = try #require(localTransport["send"] as? [String: Any])
        #expect((localSend["totalSentBytes"] as? Int ?? 0) > 0)
        #expect((localSend["outgoingBitrate"] as? Double ?? 0) > 0)
        #expect((localTransport["receive"] as? [String: Any])?["incomingBitrate"] is Double)
        await viewer.leave()
        await pub.leave()
    }

    /// Rows are the sampling clock's last interval: the first row already has a bitrate, two callers
    /// asking back to back see the same interval, own streams carry what the receiver reports say
    /// (jitter, RTT) and remote streams an RTT; a remote's transport stats include what it receives.
    @Test func statsReportWhatRTCPSaysAndDoNotDependOnTheCaller() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (pub, pubLog) = try await joinedRoom(
            server, room: "stats-truth", id: "pub", mode: .SEND_AND_RECV, mic: true, cam: true)
        try await waitUntil("camera on") { pubLog.has("streamOn:pub:video") }
        let (viewer, viewerLog) = try await joinedRoom(server, room: "stats-truth", id: "viewer", mode: .RECV_ONLY)
        let remote = try #require(viewer.participants["pub"])
        remote.addEventListener(viewerLog)
        try await waitUntil("video at the viewer", seconds: 20) { viewerLog.has("streamOn:pub:video") }
        var first: [String: Any]?
        try await waitUntil("a first stats row", seconds: 20) {
            first = remote.getVideoStats()?.first
            return first != nil
        }
        let row = try #require(first)
        #expect((row["bitrate"] as? Double ?? 0) > 0, "the first row has a rate: \(row)")
        // Two callers, back to back: the same interval, so the same values.
        let a = try #require(remote.getAudioStats()?.first)
        let b = try #require(remote.getAudioStats()?.first)
        #expect(a["totalPackets"] as? Int == b["totalPackets"] as? Int)
        #expect((a["totalPackets"] as? Int ?? 0) > 0)
        #expect(a["bitrate"] as? Double == b["bitrate"] as? Double)
        // Remote streams: the round trip between this device and the server.
        try await waitUntil("remote rtt", seconds: 20) {
            (remote.getVideoStats()?.first?["rtt"] as? Double ?? 0) > 0
        }
        // Own streams: jitter and RTT from the server's receiver reports.
        try await waitUntil("own jitter and rtt from RR", seconds: 20) {
            let rows = pub.localParticipant.getVideoStats() ?? []
            return rows.contains { ($0["jitter"] as? Double ?? 0) > 0 && ($0["rtt"] as? Double ?? 0) > 0 }
        }
        // A remote's transport stats: what it sends and what it receives, as the server counts them.
        let atPub = try #require(pub.participants["viewer"])
        let transport = try #require(await transportStats(atPub))
        let receive = try #require(transport["receive"] as? [String: Any])
        #expect((receive["totalReceivedBytes"] as? Int ?? 0) > 0)
        #expect((receive["incomingBitrate"] as? Double ?? 0) > 0, "the first call has a rate: \(receive)")
        await viewer.leave()
        await pub.leave()
    }
}

import Foundation
import Media
import RTCWire
import RoomServer
import SDKTestSupport
import TestSupport
import Testing

@testable import Understudy

@Suite("Understudy screen share", .serialized)
struct ScreenShareTests {
    @Test func aShareReachesEveryoneWithPresenterEventsAndStats() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host, hostLog) = try await joinedRoom(server, room: "share", id: "host", mode: .SEND_AND_RECV)
        let (viewer, viewerLog) = try await joinedRoom(server, room: "share", id: "viewer", mode: .RECV_ONLY)
        let remote = try #require(viewer.participants["host"])
        remote.addEventListener(viewerLog)

        // RECV_ONLY may not share; nothing is shared yet so there is nothing to stop.
        await expectCode(3066) { try await viewer.enableScreenShare() }
        await expectCode(3054) { try await host.disableScreenShare() }
        #expect(try remote.getShareStats()?.isEmpty == true)
        await expectCode(3068) { try await remote.setScreenShareQuality(.low) }

        try await host.enableScreenShare()
        try await waitUntil("local share stream") { hostLog.has("streamOn:host:share") }
        try await waitUntil("presenter everywhere") { hostLog.has("presenter:host") && viewerLog.has("presenter:host") }
        #expect(viewer.presenterId == "host" && host.presenterId == "host")
        try await waitUntil("viewer receives the share") { viewerLog.has("streamOn:host:share") }
        #expect(!remote.webcamOn && !remote.micOn)  // a share is neither mic nor webcam
        await expectCode(3054) { try await host.enableScreenShare() }

        // Stats: the share has rows, its audio and the (absent) webcam have none.
        try await waitUntil("share stats", seconds: 20) { (try? remote.getShareStats())??.isEmpty == false }
        let shareRows = try #require(try remote.getShareStats())
        #expect(shareRows.count == 1)
        #expect((shareRows.first?["totalPackets"] as? Int ?? 0) > 0)
        #expect(shareRows.first?["codec"] as? String == "vp8")
        #expect(remote.getShareAudioStats()?.isEmpty == true)
        #expect(remote.getVideoStats()?.isEmpty == true)
        try await waitUntil("local share stats", seconds: 20) {
            (try? host.localParticipant.getShareStats())??.isEmpty == false
        }

        // Share quality: changes the share only; no webcam here, so setQuality has nothing to act on.
        try await remote.setScreenShareQuality(.low)
        #expect(remote.screenShareQuality == .low)
        #expect(remote.videoQuality == nil)
        try await remote.setScreenShareQuality(.low)  // same value: nothing to do
        await expectCode(3068) { try await remote.setQuality(.medium) }
        await expectCode(3068) { try await viewer.localParticipant.setScreenShareQuality(.high) }

        try await host.disableScreenShare()
        try await waitUntil("share stopped") { hostLog.has("streamOff:host:share") }
        try await waitUntil("presenter cleared") { hostLog.has("presenter:nil") && viewerLog.has("presenter:nil") }
        try await waitUntil("viewer share gone") { viewerLog.has("streamOff:host:share") }
        #expect(viewer.presenterId == nil)
        await expectCode(3054) { try await host.disableScreenShare() }

        await viewer.leave()
        #expect(remote.getShareAudioStats() == nil)
        #expect(try remote.getShareStats() == nil)
        await expectCode(3035) { try await remote.setScreenShareQuality(.high) }
        await host.leave()
        await expectCode(3035) { try await host.enableScreenShare() }
    }

    @Test func onlyOneParticipantSharesAndLeavingTheStageStopsTheShare() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (a, aLog) = try await joinedRoom(server, room: "share2", id: "a", mode: .SEND_AND_RECV)
        let (b, bLog) = try await joinedRoom(server, room: "share2", id: "b", mode: .SEND_AND_RECV)
        try await a.enableScreenShare()
        try await waitUntil("b sees presenter a") { bLog.has("presenter:a") }
        await expectCode(3061) { try await b.enableScreenShare() }
        #expect(!b.media.producingKinds.contains(.share))
        // A produce the server refuses (it checks too) leaves the connection usable: a mic still starts.
        do {
            try await b.media.produce([.share], reportStatus: false)
            Issue.record("a second share was accepted")
        } catch let e as UnderstudyError { #expect(e.code == 3061) }
        try await b.unmuteMic()
        try await waitUntil("b's mic") { bLog.has("streamOn:b:audio") }

        // Leaving SEND_AND_RECV stops the share: onStreamDisabled locally, onPresenterChanged(nil) everywhere.
        try await a.changeMode(.RECV_ONLY)
        try await waitUntil("a's share off") { aLog.has("streamOff:a:share") }
        try await waitUntil("presenter cleared") { aLog.has("presenter:nil") && bLog.has("presenter:nil") }
        await expectCode(3066) { try await a.disableScreenShare() }

        // Now b may share.
        try await b.enableScreenShare()
        try await waitUntil("a sees presenter b") { aLog.has("presenter:b") }
        await a.leave()
        await b.leave()
        try await waitUntil("b left") { bLog.has("left:1101") }
        #expect(bLog.has("streamOff:b:share"))
    }

    @Test func shareQualityLeavesTheWebcamQualityAlone() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host, hostLog) = try await joinedRoom(
            server, room: "share3", id: "host", mode: .SEND_AND_RECV, cam: true, multiStream: true)
        try await waitUntil("cam on") { hostLog.has("streamOn:host:video") }
        try await host.enableScreenShare()
        let (viewer, viewerLog) = try await joinedRoom(server, room: "share3", id: "viewer", mode: .RECV_ONLY)
        let remote = try #require(viewer.participants["host"])
        remote.addEventListener(viewerLog)
        try await waitForStream(remote, .share)
        try await waitForStream(remote, .video)

        try await remote.setScreenShareQuality(.low)
        #expect(remote.screenShareQuality == .low)
        #expect(remote.videoQuality == nil)

        // The first webcam event is the switch setQuality asks for: the share's quality left it alone.
        try await remote.setQuality(.medium)
        try await waitUntil("quality event") { viewerLog.events.contains { $0.hasPrefix("quality:") } }
        #expect(viewerLog.events.filter { $0.hasPrefix("quality:") } == ["quality:host:high->medium"])
        #expect(remote.screenShareQuality == .low)
        try await remote.setQuality(.medium)  // unchanged: asked again, no event
        try await remote.setQuality(.low)
        try await waitUntil("second quality event") { viewerLog.has("quality:host:medium->low") }
        #expect(viewerLog.events.filter { $0.hasPrefix("quality:") }.count == 2)
        // The local participant: setQuality does nothing.
        try await host.localParticipant.setQuality(.low)
        #expect(host.localParticipant.videoQuality == nil)
        await viewer.leave()
        await host.leave()
    }

    /// `setScreenShareQuality` works on an agent's share (docs/spec/room-api.md §7 refuses only `setQuality`).
    @Test func setScreenShareQualityWorksOnAnAgent() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let agent = try Understudy.createRoom(
            roomId: "agent-share", token: sdkToken(server, room: "agent-share"), participantName: "bot",
            participantId: "bot", micEnabled: false, camEnabled: false, mode: .SEND_AND_RECV,
            signalingBaseUrl: server.signalingURL, agentId: "bot")
        let agentLog = EventLog()
        agent.addEventListener(agentLog)
        await agent.join()
        try await agent.enableScreenShare()
        let (viewer, viewerLog) = try await joinedRoom(server, room: "agent-share", id: "viewer", mode: .RECV_ONLY)
        let remote = try #require(viewer.participants["bot"])
        #expect(remote.isAgent())
        remote.addEventListener(viewerLog)
        try await waitUntil("share arrives", seconds: 20) { viewerLog.has("streamOn:bot:share") }
        try await remote.setScreenShareQuality(.low)
        await expectCode(3068) { try await remote.setQuality(.low) }
        await viewer.leave()
        await agent.leave()
    }
}

import AgentTestSupport
import Dispatch
import Foundation
import Media
import RTCWire
import RoomServer
import SDKTestSupport
import TestSupport
import Testing

@testable import Agent
@testable import Understudy

@Suite("InviteResponder: the invite policy and the requested mode")
struct InviteResponderTests {
    static func message(_ text: String, from sender: String = "host", moderator: Bool = false, payload: String? = nil)
        -> PubSubMessage
    {
        PubSubMessage(
            id: "1", topic: InviteResponder.topic(for: "me"), message: text, senderId: sender, senderName: sender,
            timestamp: 0, payloadJSON: payload, sendOnly: [], senderIsModerator: moderator)
    }

    @Test func thePolicyDecides() {
        let plain = Self.message("SEND_AND_RECV", from: "viewer")
        let mod = Self.message("SEND_AND_RECV", from: "mod", moderator: true)
        #expect(!InviteResponder.Policy.trusted.accepts(plain))
        #expect(InviteResponder.Policy.trusted.accepts(mod))
        #expect(InviteResponder.Policy.yes.accepts(plain))
        #expect(!InviteResponder.Policy.no.accepts(mod))
        #expect(InviteResponder.Policy.from(["viewer"]).accepts(plain))
        #expect(!InviteResponder.Policy.from(["viewer"]).accepts(mod))
        #expect(InviteResponder.topic(for: "me") == "REQUEST_TO_JOIN_AS_HOST_me")
    }

    @Test func theModeComesFromTheTextOrThePayload() {
        #expect(InviteResponder.requestedMode(Self.message(" RECV_ONLY\n")) == .RECV_ONLY)
        #expect(
            InviteResponder.requestedMode(Self.message("", payload: #"{"mode":"SEND_AND_RECV"}"#)) == .SEND_AND_RECV)
        #expect(InviteResponder.requestedMode(Self.message("", payload: #""SIGNALLING_ONLY""#)) == .SIGNALLING_ONLY)
        #expect(InviteResponder.requestedMode(Self.message("please come up")) == nil)
        #expect(InviteResponder.requestedMode(Self.message("", payload: "{not json")) == nil)
    }
}

/// Issue 10 item 9: anyone can publish a stage invite, so by default (`--accept-invites trusted`)
/// the agent follows only invites from participants holding `allow_mod`, which the server reports
/// with each PubSub message (`senderIsModerator`). Issue 31 item 9: being on stage is no longer
/// trust, since an `allow_join` participant can put itself there with its own `changeMode`.
@Suite("Agent stage-invite trust", .serialized)
struct InvitePolicyTests {
    /// A room whose token lacks `allow_mod`.
    static func plainParticipant(_ server: RoomServer, room: String, id: String, mode: Mode) async throws -> Room {
        let r = try Understudy.createRoom(
            roomId: room, token: sdkToken(server, room: room, participant: id, permissions: ["allow_join"]),
            participantName: id, participantId: id, micEnabled: false, camEnabled: false, mode: mode,
            signalingBaseUrl: server.signalingURL)
        let log = EventLog()
        r.addEventListener(log)
        await r.join()
        try await waitUntil("\(id) joined") { log.has("joined") }
        return r
    }

    @Test func theDefaultFollowsOnlyModeratorInvites() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let room = "invite-trust"
        let agent = try await startAgent(
            server, room: room, id: "agent", token: sdkToken(server, room: room, participant: "agent")
        ) {
            $0.consume = .none
            #expect($0.acceptInvites == .trusted)
        }
        try await waitUntil("agent subscribed") { agent.isListeningForInvites }

        // An audience member without allow_mod: refused.
        let viewer = try await Self.plainParticipant(server, room: room, id: "viewer", mode: .RECV_ONLY)
        try await waitUntil("agent sees the viewer") { agent.room.participants["viewer"] != nil }
        try await viewer.pubSub.publish(topic: "REQUEST_TO_JOIN_AS_HOST_agent", message: "SEND_AND_RECV")
        try await waitUntil("invite refused") { agent.refusedInviteCount == 1 }
        #expect(agent.room.localParticipant.mode == .RECV_ONLY)

        // A moderator not on stage: followed.
        let (mod, _) = try await joinedRoom(server, room: room, id: "mod", mode: .SIGNALLING_ONLY)
        try await waitUntil("agent sees the moderator") { agent.room.participants["mod"] != nil }
        try await mod.pubSub.publish(topic: "REQUEST_TO_JOIN_AS_HOST_agent", message: "SEND_AND_RECV")
        try await waitUntil("invite followed", seconds: 15) { agent.room.localParticipant.mode == .SEND_AND_RECV }

        // Issue 31 item 9: an `allow_join` participant that puts itself on stage with `changeMode`
        // (the server allows it) and then invites: refused, as is one that joined on stage.
        let agent2 = try await startAgent(
            server, room: room, id: "agent2", token: sdkToken(server, room: room, participant: "agent2")
        ) { $0.consume = .none }
        try await waitUntil("second agent subscribed") { agent2.isListeningForInvites }
        let climber = try await Self.plainParticipant(server, room: room, id: "climber", mode: .RECV_ONLY)
        try await climber.changeMode(.SEND_AND_RECV)
        try await waitUntil("agent sees the climber on stage") {
            agent2.room.participants["climber"]?.mode == .SEND_AND_RECV
        }
        try await climber.pubSub.publish(topic: "REQUEST_TO_JOIN_AS_HOST_agent2", message: "SEND_AND_RECV")
        try await waitUntil("the self-promoted invite is refused") { agent2.refusedInviteCount == 1 }
        let onStage = try await Self.plainParticipant(server, room: room, id: "speaker", mode: .SEND_AND_RECV)
        try await waitUntil("agent sees the speaker on stage") {
            agent2.room.participants["speaker"]?.mode == .SEND_AND_RECV
        }
        try await onStage.pubSub.publish(topic: "REQUEST_TO_JOIN_AS_HOST_agent2", message: "SEND_AND_RECV")
        try await waitUntil("the stage member's invite is refused") { agent2.refusedInviteCount == 2 }
        #expect(agent2.room.localParticipant.mode == .RECV_ONLY)
        #expect(agent2.counters.refusedInvites == 2)
        // The moderator's invite still works for the second agent.
        try await mod.pubSub.publish(topic: "REQUEST_TO_JOIN_AS_HOST_agent2", message: "SEND_AND_RECV")
        try await waitUntil("the moderator's invite is followed", seconds: 15) {
            agent2.room.localParticipant.mode == .SEND_AND_RECV
        }
        #expect(agent.refusedInviteCount == 1)
        #expect(agent2.refusedInviteCount == 2)
        await agent.stop()
        await agent2.stop()
        for r in [viewer, mod, climber, onStage] { await r.leave() }
    }

    @Test func yesFollowsEveryone() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let room = "invite-yes"
        let agent = try await startAgent(
            server, room: room, id: "agent", token: sdkToken(server, room: room, participant: "agent")
        ) {
            $0.consume = .none
            $0.acceptInvites = .yes
        }
        try await waitUntil("agent subscribed") { agent.isListeningForInvites }
        let viewer = try await Self.plainParticipant(server, room: room, id: "viewer", mode: .RECV_ONLY)
        try await viewer.pubSub.publish(topic: "REQUEST_TO_JOIN_AS_HOST_agent", message: "SEND_AND_RECV")
        try await waitUntil("invite followed", seconds: 15) { agent.room.localParticipant.mode == .SEND_AND_RECV }
        await agent.stop()
        await viewer.leave()
    }
}

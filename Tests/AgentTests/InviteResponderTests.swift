import AgentTestSupport
import Dispatch
import Foundation
import Media
import RTCWire
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

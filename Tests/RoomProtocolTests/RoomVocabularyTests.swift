import Foundation
import RoomProtocol
import Signaling
import Testing

/// The room's vocabulary in one module: the one error, modes and track kinds with their aliases.
@Suite("Room vocabulary: RoomError, modes, track kinds")
struct RoomVocabularyTests {
    struct Underneath: Error, Equatable { var why: String }

    /// Code, canonical name, message and cause; the cause is detail (not compared, not hashed, not sent).
    @Test func roomErrorKeepsCodeNameMessageAndCause() throws {
        let cause = Underneath(why: "socket closed")
        let error = RoomError(code: 3073, message: "missing field 'kind'", cause: cause)
        #expect(error.code == 3073 && error.name == "ERROR_INVALID_PARAMETER")
        #expect(error.message == "missing field 'kind'")
        #expect(error.cause as? Underneath == cause)
        #expect(error.description == "3073 ERROR_INVALID_PARAMETER: missing field 'kind'")
        let bare = RoomError(code: 3073, message: "missing field 'kind'")
        #expect(bare.cause == nil)
        #expect(error == bare && error.hashValue == bare.hashValue && Set([error, bare]).count == 1)
        #expect(error != RoomError(code: 3073, message: "other"))
        #expect(error != RoomError(code: 3073, name: "CUSTOM", message: "missing field 'kind'"))
        // A code the table does not list reads as UNKNOWN_ERROR; an explicit name is kept as sent.
        #expect(RoomError(code: 4999, message: "x").name == "UNKNOWN_ERROR")
        #expect(RoomError(code: 4999, name: "FOREIGN_NAME", message: "x").name == "FOREIGN_NAME")
        for (code, name) in RoomError.names { #expect(RoomError.canonicalName(code) == name) }
        #expect(RoomError.names.count == 51, "the SDK's table (shared/spec/room-api.md §9) has 51 codes")
    }

    /// The wire form is `{code, name, message}` only; reading it back gives the same error, and a
    /// foreign server's missing name or message reads as empty. No code: not an error object.
    @Test func roomErrorWireForm() throws {
        let error = RoomError(4009, "room 'r' is full", cause: Underneath(why: "limit"))
        #expect(error.json.jsonString == #"{"code":4009,"message":"room 'r' is full","name":"MAX_PARTCIPANT_REACHED"}"#)
        #expect(RoomError(json: error.json) == error)
        let foreign = try JSONValue.parse(#"{"code":4002}"#)
        #expect(RoomError(json: foreign) == RoomError(code: 4002, name: "", message: ""))
        #expect(RoomError(json: try JSONValue.parse(#"{"code":"4002","name":"INVALID_TOKEN"}"#)) == nil)
        #expect(RoomError(json: try JSONValue.parse(#"{"name":"INVALID_TOKEN"}"#)) == nil)
    }

    /// What was `SignalError` (the envelope's failure) is the RoomError read from the wire.
    @Test func mapsTheEnvelopeFailureShape() throws {
        let text = #"{"id":5,"ok":false,"error":{"code":4022,"name":"UNAUTHORIZED_MEETING_ID","message":"no"}}"#
        guard case .response(let id, .failure(let error)) = try SignalEnvelope.parse(text) else {
            Issue.record("not a failed response")
            return
        }
        #expect(id == 5 && error == RoomError(4022, "no") && error.cause == nil)
        // Written back with the same members (the writer sorts keys).
        #expect(
            SignalEnvelope.response(id: 5, result: .failure(error)).text
                == #"{"error":{"code":4022,"message":"no","name":"UNAUTHORIZED_MEETING_ID"},"id":5,"ok":false}"#)
        #expect(throws: SignalEnvelopeError.invalidEnvelope("error.code must be an integer")) {
            try SignalEnvelope.parse(#"{"id":5,"ok":false,"error":{"code":"x"}}"#)
        }
    }

    /// What was the server's `RoomError(code, message, cause:)`: the same spelling, the canonical
    /// name, the cause kept for logs.
    @Test func mapsTheServerShape() {
        let error = RoomError(4081, "'bob' publishes no webcam", cause: Underneath(why: "no producer"))
        #expect(error.name == "CONSUME_WEBCAM_STREAMS_FAILED" && error.cause != nil)
        #expect(error == RoomError(code: 4081, name: "CONSUME_WEBCAM_STREAMS_FAILED", message: error.message))
    }

    /// A token refusal names itself from the table and becomes the RoomError the server sends.
    @Test func mapsTheTokenShape() {
        let cases: [(TokenError, Int, String)] = [
            (.invalid("expired"), 4002, "INVALID_TOKEN"), (.invalidPermissions, 4008, "INVALID_PERMISSIONS"),
            (.wrongRoom, 4022, "UNAUTHORIZED_MEETING_ID"), (.wrongParticipant, 4023, "UNAUTHORIZED_PARTCIPANT_ID"),
        ]
        for (token, code, name) in cases {
            #expect(token.code == code && token.name == name)
            let refusal = token.roomError
            #expect(refusal.code == code && refusal.name == name && refusal.message == token.description)
            #expect(refusal.cause as? TokenError == token)
        }
    }

    /// Modes: the three wire names and the two deprecated aliases; nothing else (case matters).
    @Test func modesAndTheirAliases() {
        #expect(ParticipantMode.allCases.map(\.rawValue) == ["SEND_AND_RECV", "RECV_ONLY", "SIGNALLING_ONLY"])
        for mode in ParticipantMode.allCases { #expect(ParticipantMode(wireName: mode.rawValue) == mode) }
        #expect(ParticipantMode(wireName: "CONFERENCE") == .sendAndRecv)
        #expect(ParticipantMode(wireName: "VIEWER") == .signallingOnly)
        for bad in ["", "recv_only", "Conference", "SEND_AND_RECV ", "sendAndRecv", "HLS"] {
            #expect(ParticipantMode(wireName: bad) == nil, "\(bad)")
        }
        #expect(ParticipantMode(rawValue: "CONFERENCE") == nil, "an alias is never sent back")
    }

    /// Track kinds: the four wire names and the SDK's stream-kind names as aliases.
    @Test func trackKindsAndTheirAliases() {
        #expect(TrackKind.allCases.map(\.rawValue) == ["mic", "webcam", "screen", "screenAudio"])
        for kind in TrackKind.allCases { #expect(TrackKind(wireName: kind.rawValue) == kind) }
        let aliases: [String: TrackKind] = [
            "audio": .mic, "video": .webcam, "share": .screen, "shareAudio": .screenAudio,
        ]
        for (alias, kind) in aliases { #expect(TrackKind(wireName: alias) == kind, "\(alias)") }
        for bad in ["", "Mic", "camera", "data", "screen_audio"] { #expect(TrackKind(wireName: bad) == nil, "\(bad)") }
        #expect(TrackKind.allCases.filter(\.isAudio) == [.mic, .screenAudio])
    }
}

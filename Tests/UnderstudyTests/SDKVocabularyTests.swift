import Foundation
import Testing

@testable import Understudy

/// The SDK's spec names are thin views over the room's vocabulary (RoomProtocol).
@Suite("SDK vocabulary: spec names over RoomProtocol")
struct SDKVocabularyTests {
    struct Underneath: Error, Equatable { var why: String }

    /// `UnderstudyError`/`VideoSDKError` are the room's one error; `underlyingError` is its cause.
    @Test func sdkErrorIsTheRoomError() {
        let cause = Underneath(why: "ICE failed")
        var error = UnderstudyError(code: 3044, message: "media connection failed", underlyingError: cause)
        #expect(error.name == "ERROR_ROOM_MEDIA_CONNECTION_FAILED")
        #expect(error.underlyingError as? Underneath == cause && error.cause as? Underneath == cause)
        let named = VideoSDKError(code: 4002, name: "INVALID_TOKEN", message: "expired", underlyingError: nil)
        #expect(named.underlyingError == nil && named.description == "4002 INVALID_TOKEN: expired")
        error.underlyingError = nil
        #expect(error.cause == nil)
        #expect(error == UnderstudyError(code: 3044, message: "media connection failed"))
        #expect(UnderstudyError.canonicalName(3066) == "ERROR_ACTION_NOT_SUPPORTED_IN_MODE")
    }

    /// `Mode` keeps its spec cases; the wire goes through the room's modes, aliases resolved.
    @Test func modeMapsToTheRoomModes() {
        #expect(Mode(wireName: "SEND_AND_RECV") == .SEND_AND_RECV && Mode(wireName: "CONFERENCE") == .SEND_AND_RECV)
        #expect(Mode(wireName: "RECV_ONLY") == .RECV_ONLY)
        #expect(Mode(wireName: "VIEWER") == .SIGNALLING_ONLY && Mode(wireName: "SIGNALLING_ONLY") == .SIGNALLING_ONLY)
        #expect(Mode(wireName: "recv_only") == nil && Mode(wireName: "") == nil)
        #expect(Mode.CONFERENCE.participantMode.rawValue == "SEND_AND_RECV")
        #expect(Mode.VIEWER.participantMode.rawValue == "SIGNALLING_ONLY")
        #expect(
            Mode.allCases.map(\.canonical) == [
                .SEND_AND_RECV, .RECV_ONLY, .SIGNALLING_ONLY, .SEND_AND_RECV, .SIGNALLING_ONLY,
            ])
    }

    /// `StreamKind` keeps its spec cases; its wire names are the room's track kinds.
    @Test func streamKindMapsToTheTrackKinds() {
        let wire: [StreamKind: String] = [
            .audio: "mic", .video: "webcam", .share: "screen", .shareAudio: "screenAudio",
        ]
        for (kind, name) in wire {
            #expect(kind.wireKind == name)
            #expect(StreamKind(wire: name) == kind && StreamKind(wire: kind.rawValue) == kind, "\(kind)")
        }
        #expect(StreamKind(wire: "camera") == nil)
    }
}

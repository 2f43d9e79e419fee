import Foundation
import RTC
import RTCWire
import RoomServer
import SDKTestSupport
import TestSupport
import Testing

@testable import Understudy

@Suite("Understudy errors", .serialized)
struct UnderstudyErrorTests {
    @Test func errorsCarryCodeNameAndMessageAsVideoSDKError() throws {
        do {
            _ = try Understudy.createRoom(roomId: "r", token: "t", participantName: "n", participantId: "a b")
            Issue.record("a participantId with whitespace was accepted")
        } catch {
            let error: VideoSDKError = error
            #expect(error.code == 4004)
            #expect(error.name == "INVALID_PARTICIPANT_ID")
            #expect(!error.message.isEmpty)
        }
        #expect(UnderstudyError.canonicalName(3069) == "ERROR_CAPTURE_IMAGE_FAILED")
        #expect(UnderstudyError.canonicalName(3062) == "ERROR_WEBCAM_NOT_ENABLED")
        #expect(UnderstudyError.canonicalName(3068) == "ERROR_ACTION_NOT_SUPPORTED")
        #expect(UnderstudyError.canonicalName(4009) == "MAX_PARTCIPANT_REACHED")  // the documented typo
    }

    @Test func aCauseIsKeptButNotCompared() {
        struct Cause: Error, Equatable { let detail: String }
        let caused = UnderstudyError(
            code: 3044, message: "publish connection failed", underlyingError: Cause(detail: "x"))
        let plain = UnderstudyError(code: 3044, message: "publish connection failed")
        #expect((caused.underlyingError as? Cause) == Cause(detail: "x"))
        #expect(caused == plain)
        #expect(Set([caused, plain]).count == 1)
        #expect(caused != UnderstudyError(code: 3044, message: "another message"))
    }

    @Test func localWebRTCFailuresAreVideoSDKErrorsThatKeepTheirCause() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (room, _) = try await joinedRoom(server, room: "raw-errors", id: "me", mode: .SEND_AND_RECV)
        // An address this host does not have (TEST-NET-1): the publish connection's socket cannot bind.
        room.media.connectionConfiguration.bindAddresses = ["192.0.2.1"]
        func expectMediaError(_ what: String, _ codes: Set<Int>, _ body: () async throws -> Void) async {
            do {
                try await body()
                Issue.record("\(what) succeeded")
            } catch let error as VideoSDKError {
                #expect(codes.contains(error.code), "\(what): \(error)")
                #expect(error.name == UnderstudyError.canonicalName(error.code))
                #expect(
                    error.underlyingError is PeerConnectionError,
                    "\(what): \(String(describing: error.underlyingError))")
            } catch {
                Issue.record("\(what) threw a raw error: \(error)")
            }
        }
        await expectMediaError("unmuteMic", [3044, 3058]) { try await room.unmuteMic() }
        await expectMediaError("enableCam", [3044, 3049]) { try await room.enableCam() }
        await expectMediaError("enableScreenShare", [3044, 3061]) { try await room.enableScreenShare() }
        try await room.changeMode(.RECV_ONLY)
        // Back on stage the camera and mic of createRoom are published: that fails the same way.
        let (viewer, _) = try await joinedRoom(
            server, room: "raw-errors", id: "v", mode: .RECV_ONLY, mic: true, cam: true)
        viewer.media.connectionConfiguration.bindAddresses = ["192.0.2.1"]
        await expectMediaError("changeMode", [3044, 3049]) { try await viewer.changeMode(.SEND_AND_RECV) }
        await viewer.leave()
        await room.leave()
    }
}

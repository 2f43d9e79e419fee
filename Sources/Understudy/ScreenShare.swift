import Foundation
import RoomProtocol
import Signaling

extension Room {
    /// Starts sharing the local participant's screen: the synthetic test pattern (one layer), or what
    /// ``mediaSourceFactory`` makes for a video track with 1 layer. Every participant gets
    /// `onPresenterChanged(localId)`; the local participant gets `onStreamEnabled` with a `share` stream
    /// and everyone else receives it (screen shares are always consumed).
    ///
    /// - Throws: 3035/3065 (gating); 3066 outside `SEND_AND_RECV`; 3054 when already sharing; 3055 while
    ///   a mode change or media toggle runs; 3061 when the share cannot start (e.g. someone else shares).
    public func enableScreenShare() async throws {
        try gate("enableScreenShare")
        if localParticipant.mode != .SEND_AND_RECV {
            throw UnderstudyError(code: 3066, message: "enableScreenShare needs SEND_AND_RECV mode")
        }
        if media.producingKinds.contains(.share) {
            throw UnderstudyError(code: 3054, message: "enableScreenShare: the screen is already shared")
        }
        if let presenter = presenterId, presenter != localParticipant.id {
            throw UnderstudyError(code: 3061, message: "enableScreenShare: '\(presenter)' is already sharing a screen")
        }
        try beginOperation("enableScreenShare")
        defer { endOperation() }
        try await media.produce([.share], reportStatus: false)
    }

    /// Stops sharing the local participant's screen (`onStreamDisabled`, then `onPresenterChanged(nil)`
    /// everywhere).
    ///
    /// - Throws: 3035/3065 (gating); 3066 outside `SEND_AND_RECV`; 3054 when not sharing; 3055 while a
    ///   mode change or media toggle runs.
    public func disableScreenShare() async throws {
        try gate("disableScreenShare")
        if localParticipant.mode != .SEND_AND_RECV {
            throw UnderstudyError(code: 3066, message: "disableScreenShare needs SEND_AND_RECV mode")
        }
        if !media.producingKinds.contains(.share) {
            throw UnderstudyError(code: 3054, message: "disableScreenShare: the screen is not shared")
        }
        try beginOperation("disableScreenShare")
        defer { endOperation() }
        await media.stopLocal(.share, onServer: true)
    }
}

extension Participant {
    /// Picks which quality of this participant's screen share this device receives. The webcam keeps
    /// its quality. Does nothing when ``screenShareQuality`` already is `quality`.
    ///
    /// - Throws: 3035/3065 (gating); 3068 when this device receives no screen share from the
    ///   participant (always for the local participant).
    public func setScreenShareQuality(_ quality: VideoQuality) async throws {
        guard let room else {
            throw UnderstudyError(code: 3035, message: "setScreenShareQuality called outside a room")
        }
        try room.gate("setScreenShareQuality")
        if isLocal || !hasStream(.share) {
            throw UnderstudyError(
                code: 3068, message: "setScreenShareQuality: this device receives no screen share from \(id)")
        }
        // Always asked: the server may have re-created the consumer since the last choice.
        _ = try await room.call(
            .setQuality,
            [
                "participantId": .string(id), "quality": .string(quality.rawValue),
                "kind": .string(TrackKind.screen.rawValue),
            ])
        setShareQuality(quality)
    }

    /// Metrics of the audio shared with this participant's screen (not the mic), since the previous
    /// sample: empty when the share has no audio; nil before the join, after leaving or while reconnecting.
    public func getShareAudioStats() -> [[String: Any]]? { room?.stats(for: self, kind: .shareAudio) }
}

import Foundation
import RTC
import RTCWire

// Package-level hooks for the headless agent (`understudy join`): not part of the documented SDK.

extension Participant {
    /// Asks this remote participant for a webcam keyframe: the subscribe connection's receiver sends
    /// a PLI (throttled by the receiver) that the SFU forwards to the publisher.
    ///
    /// Does not block: the PLI is scheduled on the subscribe loop. Does nothing for the local
    /// participant, outside a room, or while the webcam is not consumed.
    package func requestWebcamKeyframe() {
        guard !isLocal, let room else { return }
        room.media.requestWebcamKeyframe(of: id)
    }
}

extension Room {
    /// RTCP feedback the subscribe connection has sent so far, summed over its receivers.
    ///
    /// Counts restart from zero when the subscribe connection is replaced (after a reconnection).
    /// Waits up to 2 s for the subscribe loop; call it off that loop's hot path (metrics, tests).
    package var subscribeFeedbackSent: (plis: UInt64, nacks: UInt64) { media.receiverFeedbackSent() }

    /// The publish connection's send-side bandwidth estimate (from the server's transport-cc
    /// feedback) as of the last stats sampling tick; nil off stage or before any feedback.
    package var publishBandwidthEstimate: BandwidthEstimate? { media.publishEstimate }
}

/// The quality reading of one consumed track (``Room/receiveQuality()``).
package struct ReceivedTrackQuality: Sendable {
    /// Who publishes the track.
    package var participantId: String
    /// Which of the participant's streams it is.
    package var kind: StreamKind
    /// The subscribe connection's m-line that carries it.
    package var mid: String
    /// Its quality without decoding (``ReceiveQualitySnapshot``).
    package var quality: ReceiveQualitySnapshot
}

extension Room {
    /// The quality of every consumed track, measured by the subscribe connection's receivers
    /// (fps, freezes, jitter-buffer delay, concealment and MOS, loss and feedback, latency). A track
    /// whose m-line carried several streams reports the one with the most frames.
    /// Waits up to 2 s for the subscribe loop; call it off that loop (metrics, manifests, scenarios).
    package func receiveQuality() -> [ReceivedTrackQuality] { media.receiveQuality() }
}

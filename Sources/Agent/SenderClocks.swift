import RTCWire

/// Lip sync of each participant's mic to its webcam by their RTCP sender reports, for the mixed audio
/// and so for the composite, whose tiles show each picture when it arrives.
///
/// A sender's streams share its wall clock: a sender report maps each stream's RTP timestamps onto it
/// (``RemoteTrack/senderTime``), whatever the streams' timestamp origins. The webcam's frames set the
/// mapping from that clock to ours: the smallest `arrival − senderTime` seen, the delay of the fastest
/// frame (jitter only ever adds to it). A mic frame then belongs at its sender time plus that same
/// delay: where the picture captured with it arrives. A sender whose audio leaves later than its
/// video (or earlier) is thus still in sync in the mix and the composite; without a webcam, or
/// before its first sender report, the mic keeps its arrival timing (``AudioEgress``).
///
/// A delay that grows by more than ``resetNanos`` at once is a new sender clock (a restart), not
/// jitter: the mapping starts again from that frame.
///
/// Confined to the subscribe connection's loop thread (every track's frames arrive there).
final class SenderClocks {
    /// A webcam frame this much later than the mapping says is a new clock.
    static let resetNanos: Int64 = 2_000_000_000

    /// Per participant: the webcam's smallest `arrival − senderTime`, in nanoseconds.
    private var videoDelay: [String: Int64] = [:]

    /// A webcam frame of `participantId` that arrived at `arrival` (monotonic ns) with sender time `senderTime`.
    func video(_ participantId: String, senderTime: NTPTime, arrival: UInt64) {
        let delay = Int64(bitPattern: arrival &- senderTime.unixNanoseconds)
        if let known = videoDelay[participantId], delay >= known, delay - known <= Self.resetNanos { return }
        videoDelay[participantId] = delay
    }

    /// Where a mic frame of `participantId` with sender time `senderTime` belongs on the monotonic
    /// clock (nanoseconds): beside the webcam's picture of the same instant. Nil while the mapping is
    /// unknown (no webcam, or no sender report on either stream yet).
    func audioTime(_ participantId: String, senderTime: NTPTime?) -> UInt64? {
        guard let senderTime, let delay = videoDelay[participantId] else { return nil }
        return senderTime.unixNanoseconds &+ UInt64(bitPattern: delay)
    }

    /// The participant left: its mapping goes (a rejoin may come with another clock).
    func forget(_ participantId: String) { videoDelay[participantId] = nil }
}

import Foundation
import RTCWire

extension ReceiveQualitySnapshot {
    /// The reading in one line, as load reports and scenario failures show a track: frames and rate
    /// (video) or packets played, freezes or concealment and MOS, loss, jitter, the playout buffer and
    /// any pauses. Here rather than in `RTCWire`, which has no Foundation.
    public var reading: String {
        var parts = [
            kind == "video"
                ? String(format: "%llu frames, %.1f fps", frames, framesPerSecond)
                : String(format: "%llu packets played", frames)
        ]
        if kind == "video" {
            parts.append(String(format: "freezes %llu (%.0f ms)", freezeCount, totalFreezesDurationMs))
        } else {
            parts.append(String(format: "%.2f%% concealed, MOS %.2f", concealmentPercent ?? 0, mos ?? 0))
        }
        parts.append(
            String(format: "loss %.2f%%, jitter %.1f ms, buffer %.1f ms", lossPercent, jitterMs, jitterBufferDelayMs))
        if pauseCount > 0 { parts.append("\(pauseCount) pauses") }
        return parts.joined(separator: ", ")
    }
}

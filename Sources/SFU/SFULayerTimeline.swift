import RTC
import RTCWire

/// Places the first packet of a new simulcast layer on the outgoing timeline at a layer switch.
///
/// Each layer has its own RTP timestamp origin, so the new layer's timestamps must be offset to
/// continue the old ones. The right offset is the capture-time difference between the last packet
/// sent and the switch packet: the publisher's sender reports map each layer's RTP time to its wall
/// clock, so two SRs give it exactly (as mediasoup and LiveKit do). Without SRs for both layers the
/// loop time since the last packet stands in, at least one frame interval.
enum SFULayerTimeline {
    /// A layer's latest sender report: wall clock (NTP) at one RTP timestamp, and that instant on our
    /// loop clock (``RTPReceiver/senderReport``).
    typealias SenderReport = (ntp: NTPTime, rtpTimestamp: UInt32, localTime: UInt64)

    /// SR-derived gaps larger than this mean a stale or bogus report: use the loop clock instead.
    static let maximumGap: UInt64 = 10_000_000_000

    /// RTP ticks from source timestamp `old` (of the layer reported by `oldReport`) to `new` (of the
    /// layer reported by `newReport`), by the publisher's wall clock; nil when that is unknown or
    /// implausible.
    static func ticks(
        from old: UInt32, _ oldReport: SenderReport?, to new: UInt32, _ newReport: SenderReport?, clockRate: UInt32
    ) -> Int64? {
        guard let oldReport, let newReport, clockRate > 0 else { return nil }
        // Whole ticks from each report to its packet stay exact; only the gap between the two
        // reports' wall clocks is converted.
        let reportGap = newReport.ntp.nanosecondsSince1900 - oldReport.ntp.nanosecondsSince1900
        let ticks =
            Int64(Int32(bitPattern: new &- newReport.rtpTimestamp))
            - Int64(Int32(bitPattern: old &- oldReport.rtpTimestamp)) + reportGap * Int64(clockRate) / 1_000_000_000
        guard (ticks.magnitude / UInt64(clockRate)) * 1_000_000_000 <= maximumGap else { return nil }
        return ticks
    }

    /// RTP ticks to advance at a switch: from the sender reports when both layers have one, else the
    /// loop time `elapsed` since the last packet sent; never less than one tick (a new frame must not
    /// share the previous frame's timestamp), and without reports at least one 30 fps frame (the new
    /// layer's key frame may be of the same instant as the last frame sent).
    static func advance(
        from old: UInt32, _ oldReport: SenderReport?, to new: UInt32, _ newReport: SenderReport?, elapsed: UInt64,
        clockRate: UInt32
    ) -> UInt32 {
        if let ticks = ticks(from: old, oldReport, to: new, newReport, clockRate: clockRate) {
            return UInt32(truncatingIfNeeded: max(1, ticks))
        }
        let byClock = rtpTicks(nanoseconds: min(elapsed, maximumGap), clockRate: clockRate)
        return UInt32(truncatingIfNeeded: max(UInt64(clockRate / 30), byClock))
    }
}

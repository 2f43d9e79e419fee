import RTCWire

/// Maps a remote sender's report times (its NTP wall clock) onto our loop clock.
///
/// The mapping is the offset between the two clocks plus the path's least delay: the lowest
/// (arrival − NTP) of the last few reports, so that one report's own transit jitter (a queue, a busy
/// loop) does not move it. The streams of one sender share its clock and its path, so their reports
/// land on one timeline: what keeps a publisher's audio and video in step when an SFU writes its own
/// reports for them. Allocated once; updated per report, never per packet.
struct SenderClockMapping {
    /// Reports kept for the floor (Chromium: about 1 s apart for video, 5 s for audio).
    static let window = 8
    /// A report this much later than the floor means the sender's clock stepped back (or the path's
    /// delay rose for good): the floor starts again from it.
    static let stepLimit: Int64 = 1_000_000_000

    private var delays: [Int64] = Array(repeating: 0, count: window)
    private var count = 0
    private var next = 0
    /// Loop time minus sender time (ns) at the least delay seen lately; meaningful once a report came.
    private(set) var floor: Int64 = 0

    /// A report stamped `ntp` by its sender arrived at loop time `arrival`.
    mutating func add(ntp: NTPTime, arrival: UInt64) {
        let delay = Int64(bitPattern: arrival) &- ntp.nanosecondsSince1900
        if count > 0, delay &- floor > Self.stepLimit { count = 0 }
        if count == 0 { next = 0 }
        delays[next] = delay
        next = (next + 1) % Self.window
        count = min(count + 1, Self.window)
        var lowest = delays[0]
        for i in 1..<count where delays[i] < lowest { lowest = delays[i] }
        floor = lowest
    }

    /// The loop time of the sender's wall-clock instant `ntp` (nil before the first report).
    func localTime(of ntp: NTPTime) -> UInt64? {
        guard count > 0 else { return nil }
        return UInt64(bitPattern: ntp.nanosecondsSince1900 &+ floor)
    }
}

/// Groups acknowledged packets by send time and reports, for each pair of consecutive groups, how
/// far apart they left and how far apart they arrived (GCC's inter-arrival filter input).
///
/// Packets sent within ``burstMicros`` of a group's first packet form one group (a frame's
/// packets, paced or not); so does a packet that arrived within ``burstMicros`` of the group's last
/// and whose delay did not grow (a burst the network delivered back to back). A packet sent before
/// the current group (reordered feedback) is skipped; three groups in a row that arrived before
/// their predecessor (reordering on the path) reset the grouping. Value type, no allocation.
struct InterArrivalGrouper {
    /// One group's deltas to the previous group.
    struct Delta: Equatable {
        /// Send time difference of the groups' last packets, ms.
        var sendDeltaMs: Double
        /// Arrival time difference of the groups' last packets, ms.
        var arrivalDeltaMs: Double
        /// Arrival time of the completed group, ms (the trendline's x axis).
        var arrivalTimeMs: Double
        /// Size difference in bytes.
        var sizeDelta: Int
    }

    static let burstMicros: Int64 = 5_000
    static let reorderedResetCount = 3
    /// A group arriving this much later than sent relative to the previous one means a clock jump
    /// or a path change: start over.
    static let arrivalJumpMicros: Int64 = 3_000_000

    private struct Group {
        var firstSend: Int64
        var lastSend: Int64
        var firstArrival: Int64
        var lastArrival: Int64
        var size: Int
    }

    private var current: Group?
    private var previous: Group?
    private var reorderedInARow = 0
    /// Groups dropped because they arrived before their predecessor.
    private(set) var reorderedGroups: UInt64 = 0
    /// Times the grouping started over.
    private(set) var resets: UInt64 = 0

    init() {}

    /// Adds one acknowledged packet (times in µs: send on our clock, arrival on the peer's) and
    /// returns the deltas when it closes a group that has a predecessor.
    mutating func add(sendMicros: Int64, arrivalMicros: Int64, size: Int) -> Delta? {
        guard var group = current else {
            current = Group(
                firstSend: sendMicros, lastSend: sendMicros, firstArrival: arrivalMicros, lastArrival: arrivalMicros,
                size: size)
            return nil
        }
        if sendMicros < group.firstSend { return nil }  // out of order in send time
        if belongs(sendMicros: sendMicros, arrivalMicros: arrivalMicros, to: group) {
            group.lastSend = max(group.lastSend, sendMicros)
            group.lastArrival = max(group.lastArrival, arrivalMicros)
            group.size += size
            current = group
            return nil
        }
        // `sendMicros` starts a new group: the current one is complete.
        var delta: Delta?
        if let previous {
            let sendDelta = group.lastSend - previous.lastSend
            let arrivalDelta = group.lastArrival - previous.lastArrival
            if arrivalDelta < 0 {
                reorderedGroups &+= 1
                reorderedInARow += 1
                if reorderedInARow >= Self.reorderedResetCount { reset() }
                current = Group(
                    firstSend: sendMicros, lastSend: sendMicros, firstArrival: arrivalMicros,
                    lastArrival: arrivalMicros, size: size)
                return nil
            }
            reorderedInARow = 0
            if arrivalDelta - sendDelta > Self.arrivalJumpMicros {
                reset()
                current = Group(
                    firstSend: sendMicros, lastSend: sendMicros, firstArrival: arrivalMicros,
                    lastArrival: arrivalMicros, size: size)
                return nil
            }
            delta = Delta(
                sendDeltaMs: Double(sendDelta) / 1000, arrivalDeltaMs: Double(arrivalDelta) / 1000,
                arrivalTimeMs: Double(group.lastArrival) / 1000, sizeDelta: group.size - previous.size)
        }
        previous = group
        current = Group(
            firstSend: sendMicros, lastSend: sendMicros, firstArrival: arrivalMicros, lastArrival: arrivalMicros,
            size: size)
        return delta
    }

    private func belongs(sendMicros: Int64, arrivalMicros: Int64, to group: Group) -> Bool {
        if sendMicros - group.firstSend <= Self.burstMicros { return true }
        // A burst: it arrived right after the group and its one-way delay shrank.
        let arrivalDelta = arrivalMicros - group.lastArrival
        let sendDelta = sendMicros - group.lastSend
        return arrivalDelta >= 0 && arrivalDelta <= Self.burstMicros && arrivalDelta - sendDelta < 0
    }

    mutating func reset() {
        current = nil
        previous = nil
        reorderedInARow = 0
        resets &+= 1
    }
}

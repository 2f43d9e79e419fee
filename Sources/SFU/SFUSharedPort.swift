import RTC

/// What the shared UDP port (single-port mode) has seen of its receive queue: how long datagrams
/// waited in the kernel before the SFU's loop read them, and what was dropped on the way.
public struct SFUSharedPortStatistics: Sendable, Equatable {
    /// Datagrams the loop read from the port.
    public var received: UInt64 = 0
    /// Datagrams the kernel dropped because the port's receive buffer was full (`SO_RXQ_OVFL`).
    public var kernelDrops: UInt64 = 0
    /// SRTP/SRTCP dropped unread because they waited longer than ``SFUConfiguration/staleMediaAfter``.
    public var staleMediaDropped: UInt64 = 0
    /// Datagrams that matched no connection (an unknown ICE ufrag, or media from an unchecked address).
    public var unroutable: UInt64 = 0
    /// Of those, STUN naming an unknown ufrag (a connection not created yet, or closed).
    public var unknownUfrag: UInt64 = 0
    /// Sum (nanoseconds) and count of the waits in the receive queue.
    public var queueDelaySum: UInt64 = 0
    public var queueDelayCount: UInt64 = 0
    /// Datagrams that waited at least 100 ms, and at least 1 s.
    public var delayedOver100ms: UInt64 = 0
    public var delayedOver1s: UInt64 = 0
    /// The longest wait of any datagram, and of a STUN datagram, since the previous reading
    /// (nanoseconds; each reading starts a new interval).
    public var longestWait: UInt64 = 0
    public var longestSTUNWait: UInt64 = 0
    public init() {}
}

extension SFU {
    /// The shared port's receive-queue figures (nil unless every connection shares one port and one
    /// was opened). Starts a new interval for the longest waits.
    public func sharedPortStatistics() async -> SFUSharedPortStatistics? {
        await loop.submit { [self] in
            guard let mux = sharedPort, let socket = mux.socket else { return nil }
            var s = SFUSharedPortStatistics()
            s.received = socket.packetsReceived
            s.kernelDrops = socket.kernelDrops
            s.staleMediaDropped = socket.droppedStale
            s.unroutable = mux.droppedUnroutable
            s.unknownUfrag = mux.droppedUnknownUfrag
            s.queueDelaySum = socket.queueDelaySum
            s.queueDelayCount = socket.queueDelayCount
            s.delayedOver100ms = socket.queueDelayedOver100ms
            s.delayedOver1s = socket.queueDelayedOver1s
            let longest = socket.takeLongestWaits()
            s.longestWait = longest.any
            s.longestSTUNWait = longest.stun
            return s
        }
    }
}

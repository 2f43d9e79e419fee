import RTCWire

/// Feedback and buffering choices for one ``RTPReceiver``.
public struct RTPReceiverOptions: Sendable, Equatable {
    /// Send generic NACKs for missing video packets (RFC 4585 `nack`).
    public var nack: Bool
    /// Send PLIs to request key frames (`nack pli`).
    public var pli: Bool
    /// CNAME for the SDES chunk sent with scheduled receiver reports (none when empty).
    public var cname: String
    /// Packets held for reordering and frame assembly (video). Memory is this × 1500 bytes.
    public var bufferPackets: Int
    /// How many times one missing packet is NACKed before it is given up.
    public var maxNACKRetries: Int
    /// A missing packet older than this is given up even with retries left.
    public var maxNACKAge: UInt64
    /// Without NACK, how long a hole is waited for (reordering) before it is given up.
    public var reorderWait: UInt64
    /// Minimum spacing of PLIs.
    public var keyframeRequestInterval: UInt64
    /// Nominal spacing of receiver reports (randomized ±50 %).
    public var reportInterval: UInt64
    /// Minimum spacing of NACK messages.
    public var nackInterval: UInt64

    /// Creates options; times are nanoseconds.
    public init(
        nack: Bool = true, pli: Bool = true, cname: String = "", bufferPackets: Int = 256, maxNACKRetries: Int = 10,
        maxNACKAge: UInt64 = 1_000_000_000, reorderWait: UInt64 = 50_000_000,
        keyframeRequestInterval: UInt64 = 500_000_000, reportInterval: UInt64 = 1_000_000_000,
        nackInterval: UInt64 = 20_000_000
    ) {
        self.nack = nack
        self.pli = pli
        self.cname = cname
        self.bufferPackets = bufferPackets
        self.maxNACKRetries = maxNACKRetries
        self.maxNACKAge = maxNACKAge
        self.reorderWait = reorderWait
        self.keyframeRequestInterval = keyframeRequestInterval
        self.reportInterval = reportInterval
        self.nackInterval = nackInterval
    }
}

/// Timing that comes with each assembled frame.
public struct FrameTiming: Sendable, Equatable {
    /// The frame's RTP timestamp as sent.
    public var rtpTimestamp: UInt32
    /// Monotonic time (ns) at which the packet completing the frame arrived.
    public var arrivalTime: UInt64
    /// The sender's wall-clock time for this RTP timestamp, mapped through its latest sender report;
    /// nil until a sender report has been seen.
    public var ntpTime: NTPTime?
}

/// Counters of one ``RTPReceiver``; the SDK's audio/video stats are built from these.
public struct RTPReceiverStats: Sendable, Equatable {
    /// Unique media packets received (retransmissions that filled a hole included).
    public var packetsReceived: UInt64 = 0
    /// Bytes of all packets received, headers included.
    public var bytesReceived: UInt64 = 0
    /// Cumulative packets lost: expected − received (RFC 3550 §6.4.1).
    public var packetsLost: Int64 = 0
    /// Packets received more than once.
    public var packetsDuplicated: UInt64 = 0
    /// Packets that arrived after their frame was released or given up.
    public var packetsLate: UInt64 = 0
    /// Packets dropped as malformed (bad RTX, bad VP8 descriptor, empty payload).
    public var packetsMalformed: UInt64 = 0
    /// Packets with an unexpected payload type or SSRC.
    public var packetsUnknown: UInt64 = 0
    /// Missing packets given up (no retransmission in time).
    public var packetsGivenUp: UInt64 = 0
    /// NACK messages sent.
    public var nacksSent: UInt64 = 0
    /// Sequence numbers requested in those NACK messages.
    public var nackedSequenceNumbers: UInt64 = 0
    /// PLIs sent.
    public var plisSent: UInt64 = 0
    /// FIRs sent (this receiver uses PLI only).
    public var firsSent: UInt64 = 0
    /// Packets that arrived as retransmissions (RTX, or repairing a NACKed hole).
    public var retransmissionsReceived: UInt64 = 0
    /// Complete frames assembled from packets.
    public var framesAssembled: UInt64 = 0
    /// Frames delivered as decodable.
    public var framesDecodable: UInt64 = 0
    /// Frames dropped: broken by loss, or undecodable while waiting for a key frame.
    public var framesDropped: UInt64 = 0
    /// Key frames delivered.
    public var keyframesReceived: UInt64 = 0
    /// Interarrival jitter (RFC 3550 A.8) in milliseconds.
    public var jitter: Double = 0
    /// Monotonic time (ns) of the last packet; 0 before any.
    public var lastPacketTime: UInt64 = 0
    /// Receiver reports sent.
    public var receiverReportsSent: UInt64 = 0
}

/// One received packet as ``RTPReceiver/receive(_:header:now:)`` read it: the media sequence number
/// and codec payload (RTX unwrapped) and the codec header parsed once. Its buffer is only valid
/// during the call that produced it.
public struct RTPReceivedPayload {
    /// The media sequence number (the original one for an RTX repair).
    public let sequenceNumber: UInt16
    /// The codec payload (for VP8: descriptor and data), without the RTX prefix.
    public let payload: UnsafeRawBufferPointer
    /// The codec payload header, read once.
    public let info: RTPPayloadInfo
    /// Whether it arrived as an RTX retransmission.
    public let isRepair: Bool
}

/// Receives one incoming RTP stream: sequence tracking, loss and NACK, jitter, reordering, frame
/// assembly with key-frame discipline, and RTCP receiver feedback.
///
/// Confined to the event-loop thread. Packets are copied into a preallocated slot ring; the only
/// allocation is the `[UInt8]` of each delivered frame.
///
/// Video (VP8): frames are delivered in order, complete (S=1/PID=0 packet to the marker bit, no gaps)
/// and decodable: after a loss that breaks a frame, frames are dropped until the next key frame, which
/// is requested with PLIs (throttled, repeated while waiting). Audio (Opus): each packet is a frame and is
/// delivered on arrival; late packets are dropped and losses are skipped.
public final class RTPReceiver: @unchecked Sendable {
    private static let slotSize = 1500

    /// The media SSRC.
    public let ssrc: UInt32
    /// The codec of the stream.
    public let codec: MediaCodec
    /// The media payload type.
    public let payloadType: UInt8
    /// The RTX payload type, when negotiated.
    public private(set) var rtxPayloadType: UInt8?
    /// The RTX SSRC, when known.
    public var rtxSSRC: UInt32?
    /// SSRC used as the sender of this receiver's RTCP.
    public let localSSRC: UInt32
    /// Options.
    public let options: RTPReceiverOptions

    /// Called with each complete, decodable frame in order.
    public var onFrame: ((EncodedFrame, FrameTiming) -> Void)?
    /// Round-trip estimate (ns) used to space NACK retries; the PeerConnection may update it.
    public var roundTripTime: UInt64 = 100_000_000

    /// Counters; `packetsLost` is computed on read.
    public var stats: RTPReceiverStats {
        var s = counters
        let statistics = links.statistics
        s.packetsReceived = statistics.packetsReceived
        s.packetsLost = started ? statistics.packetsLost(baseExt: baseExt, highestExt: highestExt) : 0
        s.jitter = statistics.jitter.milliseconds
        s.receiverReportsSent = statistics.receiverReportsSent
        s.packetsGivenUp = links.nack.packetsGivenUp
        s.retransmissionsReceived += links.nack.holesFilled
        s.nacksSent = links.nack.nacksSent
        s.nackedSequenceNumbers = links.nack.nackedSequenceNumbers
        s.plisSent = links.keyframes.plisSent
        return s
    }
    private var counters = RTPReceiverStats()

    // Sequence tracking. Extended sequence numbers are biased by 2^16 so early reordering stays positive.
    private var started = false
    private var baseExt: Int64 = 0
    private var highestExt: Int64 = 0
    private var frontier: Int64 = 0  // next packet the assembler needs (video) / after the last delivered (audio)
    private var firstArrival: UInt64 = 0

    /// The stream's features as a chain: receive statistics and reports, NACK generator, key-frame
    /// requester (RTPLinkChain.swift). The frame assembly below drives the last two directly
    /// (holes it skips, key frames it needs).
    private var links: RTPReceiverLinks

    // Packet slots (video). slotExt == -1 marks an empty slot.
    private let capacity: Int
    private let storage: UnsafeMutableRawBufferPointer
    private var slotExt: [Int64]
    private var slotTimestamp: [UInt32]
    private var slotMarker: [Bool]
    private var slotFrameStart: [Bool]
    private var slotKeyframe: [Bool]
    private var slotPictureID: [Int32]
    private var slotLength: [Int]
    /// Whether the slot's payload bytes were kept (only while someone consumes frames).
    private var slotHasData: [Bool]
    private var slotArrival: [UInt64]
    // Ring remembering which extended numbers were seen, for dedupe.
    private var seenExt: [Int64]

    // Key-frame discipline.
    private var waitingForKeyframe = true
    private var skipping = false  // inside a broken frame: dropping until the next frame start
    // Until the assembler has found a frame start, packets reordered ahead of the first one still count.
    private var synced = false
    private var skippedMedia = false
    private var lastPictureID: Int32 = -1
    private var lastPictureIDLong = true

    private let rtcpBuffer: UnsafeMutableRawBufferPointer

    /// Creates a receiver.
    public init(
        ssrc: UInt32, codec: MediaCodec, payloadType: UInt8, rtxPayloadType: UInt8? = nil, rtxSSRC: UInt32? = nil,
        localSSRC: UInt32, options: RTPReceiverOptions = RTPReceiverOptions(), seed: UInt64? = nil
    ) {
        self.ssrc = ssrc
        self.codec = codec
        self.payloadType = payloadType
        self.rtxPayloadType = rtxPayloadType
        self.rtxSSRC = rtxSSRC
        self.localSSRC = localSSRC
        self.options = options
        capacity = codec == .vp8 ? max(16, options.bufferPackets) : 1
        storage = .allocate(byteCount: capacity * Self.slotSize, alignment: 16)
        slotExt = Array(repeating: -1, count: capacity)
        slotTimestamp = Array(repeating: 0, count: capacity)
        slotMarker = Array(repeating: false, count: capacity)
        slotFrameStart = Array(repeating: false, count: capacity)
        slotKeyframe = Array(repeating: false, count: capacity)
        slotPictureID = Array(repeating: -1, count: capacity)
        slotLength = Array(repeating: 0, count: capacity)
        slotHasData = Array(repeating: false, count: capacity)
        slotArrival = Array(repeating: 0, count: capacity)
        let ringSize = max(capacity, 1024)
        seenExt = Array(repeating: -1, count: ringSize)
        links = RTPReceiverLinks(
            statistics: ReceiveStatistics(
                ssrc: ssrc, clockRate: codec.clockRate, cname: options.cname, reportInterval: options.reportInterval,
                seed: seed ?? UInt64.random(in: .min ... .max)),
            nack: NACKGenerator(
                options: options, capacity: min(capacity, 256), tracksHoles: codec == .vp8, givenUpRing: ringSize),
            keyframes: KeyframeRequester(
                enabled: codec == .vp8 && options.pli, interval: options.keyframeRequestInterval))
        rtcpBuffer = .allocate(byteCount: 1500, alignment: 16)
    }

    /// Creates a receiver with default options apart from NACK and PLI.
    public convenience init(
        ssrc: UInt32, codec: MediaCodec, payloadType: UInt8, rtxPayloadType: UInt8? = nil, rtxSSRC: UInt32? = nil,
        localSSRC: UInt32, nack: Bool, pli: Bool
    ) {
        self.init(
            ssrc: ssrc, codec: codec, payloadType: payloadType, rtxPayloadType: rtxPayloadType, rtxSSRC: rtxSSRC,
            localSSRC: localSSRC, options: RTPReceiverOptions(nack: nack, pli: pli))
    }

    /// Binds the RTX (repair) stream once its SSRC is learned, e.g. from `ssrc-group:FID` or repaired-rid.
    public func setRTX(ssrc: UInt32, payloadType: UInt8) {
        rtxSSRC = ssrc
        rtxPayloadType = payloadType
    }

    deinit {
        storage.deallocate()
        rtcpBuffer.deallocate()
    }

    // MARK: - Receive

    /// Handles one plaintext RTP packet of this stream (media or RTX) whose header was parsed by
    /// `RTPHeader.parse`.
    ///
    /// - Returns: the packet as read (RTX unwrapped, codec header parsed once), also for a duplicate
    ///   or late packet, so a forwarder reuses the parse; nil when the packet was dropped as malformed,
    ///   unknown, or an RTX padding probe.
    @discardableResult
    public func receive(_ packet: UnsafeRawBufferPointer, header: RTPHeader, now: UInt64) -> RTPReceivedPayload? {
        counters.bytesReceived += UInt64(packet.count)
        counters.lastPacketTime = now
        let payloadEnd = header.payloadOffset + header.payloadLength
        guard header.payloadOffset >= 0, header.payloadLength >= 0, payloadEnd <= packet.count else {
            counters.packetsMalformed += 1
            return nil
        }
        var payload = UnsafeRawBufferPointer(rebasing: packet[header.payloadOffset..<payloadEnd])
        var seq = header.sequenceNumber
        let isRTX =
            (rtxSSRC != nil && header.ssrc == rtxSSRC)
            || (header.ssrc != ssrc && rtxPayloadType != nil && header.payloadType == rtxPayloadType)
        if isRTX {
            guard header.payloadType == rtxPayloadType || rtxPayloadType == nil else {
                counters.packetsUnknown += 1
                return nil
            }
            if rtxSSRC == nil { rtxSSRC = header.ssrc }
            // An RTX packet without payload is bandwidth-probe padding.
            if payload.count == 0 { return nil }
            guard payload.count > 2 else {
                counters.packetsMalformed += 1
                return nil
            }
            seq = payload.rtpGet16(0)
            payload = UnsafeRawBufferPointer(rebasing: payload[2...])
        } else {
            guard header.ssrc == ssrc, header.payloadType == payloadType else {
                counters.packetsUnknown += 1
                return nil
            }
        }
        // Validate before touching sequence state, so a corrupt packet looks like a loss. A VP8
        // packet without payload is padding: it occupies a sequence number but carries no media.
        let info: RTPPayloadInfo
        do throws(RTPPayloadError) { info = try codec.inspect(payload) } catch {
            counters.packetsMalformed += 1
            return nil
        }
        handle(
            seq: seq, timestamp: header.timestamp, marker: header.marker, payload: payload, info: info, now: now,
            retransmission: isRTX)
        return RTPReceivedPayload(sequenceNumber: seq, payload: payload, info: info, isRepair: isRTX)
    }

    private func extend(_ seq: UInt16) -> Int64 {
        guard started else { return Int64(seq) + 0x1_0000 }
        let delta = Int16(bitPattern: seq &- UInt16(truncatingIfNeeded: highestExt))
        return highestExt + Int64(delta)
    }

    private func handle(
        seq: UInt16, timestamp: UInt32, marker: Bool, payload: UnsafeRawBufferPointer, info: RTPPayloadInfo,
        now: UInt64, retransmission: Bool
    ) {
        let ext = extend(seq)
        if !started {
            started = true
            baseExt = ext
            highestExt = ext
            frontier = ext
            firstArrival = now
        }
        let ring = seenExt.count
        let ringIndex = Int(ext % Int64(ring))
        if codec == .vp8, !synced, ext < frontier, highestExt - ext < Int64(capacity), seenExt[ringIndex] != ext {
            frontier = ext  // reordered ahead of the first packet seen
        }
        if ext < frontier && codec == .vp8 || seenExt[ringIndex] == ext {
            if seenExt[ringIndex] == ext { counters.packetsDuplicated += 1 } else { counters.packetsLate += 1 }
            return
        }
        if ext < baseExt { baseExt = ext }  // reordered ahead of the first packet
        seenExt[ringIndex] = ext
        if retransmission { counters.retransmissionsReceived += 1 }

        let previousHighest = highestExt
        // A jump past the whole window: nothing before it can still complete.
        let resynced = codec == .vp8 && ext - highestExt > Int64(capacity)
        if resynced { resync(at: ext) }
        if ext > highestExt { highestExt = ext }
        links.received(
            RTPReceiveEvent(
                ext: ext, previousHighest: previousHighest, timestamp: timestamp, isRepair: retransmission,
                sinceStart: now &- firstArrival, resynced: resynced),
            now: now)

        switch codec {
        case .opus:
            deliverAudio(ext: ext, timestamp: timestamp, payload: payload, now: now)
        case .vp8:
            store(ext: ext, timestamp: timestamp, marker: marker, payload: payload, info: info, now: now)
            assemble(now: now)
        }
    }

    // MARK: Audio

    private func deliverAudio(ext: Int64, timestamp: UInt32, payload: UnsafeRawBufferPointer, now: UInt64) {
        // `frontier` is one past the last delivered packet; older packets are too late to play in order.
        if ext < frontier {
            counters.packetsLate += 1
            return
        }
        frontier = ext + 1
        counters.framesAssembled += 1
        counters.framesDecodable += 1
        // Without a consumer of frames (an SFU forwards packets), skip the per-packet copy.
        guard let onFrame else { return }
        let frame = EncodedFrame(
            codec: .opus, data: [UInt8](payload), timestamp: timestamp, isKeyframe: true,
            duration: UInt32(clamping: (try? OpusTOC.packetDuration(payload)) ?? 0))
        onFrame(frame, timing(timestamp: timestamp, arrival: now))
    }

    private func timing(timestamp: UInt32, arrival: UInt64) -> FrameTiming {
        FrameTiming(
            rtpTimestamp: timestamp, arrivalTime: arrival,
            ntpTime: links.statistics.ntpTime(of: timestamp, clockRate: codec.clockRate))
    }

    // MARK: Video buffering

    private func slot(_ ext: Int64) -> Int { Int(ext % Int64(capacity)) }

    private func store(
        ext: Int64, timestamp: UInt32, marker: Bool, payload: UnsafeRawBufferPointer,
        info: RTPPayloadInfo, now: UInt64
    ) {
        // Keep the window bounded: packets too far ahead push the assembler forward.
        if ext >= frontier + Int64(capacity) {
            forceAdvance(to: ext - Int64(capacity) + 1, now: now)
        }
        let i = slot(ext)
        var length = 0
        var start = false
        var key = false
        var pictureID: Int32 = -1
        if !payload.isEmpty {
            let media = UnsafeRawBufferPointer(rebasing: payload[info.headerLength...])
            length = min(media.count, Self.slotSize)
            // Payload bytes are only kept when someone assembles frames (an SFU forwards packets instead).
            if onFrame != nil, let src = media.baseAddress, let dst = storage.baseAddress, length > 0 {
                (dst + i * Self.slotSize).copyMemory(from: src, byteCount: length)
                slotHasData[i] = true
            } else {
                slotHasData[i] = length == 0
            }
            start = info.startsFrame
            key = info.isKeyframe
            pictureID = info.hasPictureID ? Int32(info.pictureID) : -1
            if info.hasPictureID { lastPictureIDLong = info.pictureIDIs15Bit }
        }
        slotExt[i] = ext
        slotTimestamp[i] = timestamp
        slotMarker[i] = marker
        slotFrameStart[i] = start
        slotKeyframe[i] = key
        slotPictureID[i] = pictureID
        slotLength[i] = length
        slotArrival[i] = now
    }

    private func isGivenUp(_ ext: Int64) -> Bool { links.nack.isGivenUp(ext) }

    private func giveUp(_ ext: Int64) { links.nack.markGivenUp(ext) }

    private func release(_ ext: Int64) {
        let i = slot(ext)
        if slotExt[i] == ext { slotExt[i] = -1 }
    }

    /// Gives up every packet before `target` that has not arrived, then lets the assembler run.
    private func forceAdvance(to target: Int64, now: UInt64) {
        var e = frontier
        while e < target {
            if slotExt[slot(e)] != e && !isGivenUp(e) { giveUp(e) }
            e += 1
        }
        links.nack.forget(before: target)
        assemble(now: now)
        // If the assembler still waits before target (a frame spanning the whole window), drop it.
        while frontier < target {
            release(frontier)
            frontier += 1
            markBroken(media: true)
        }
    }

    /// Drops everything buffered and restarts assembly at `ext`, in O(window) whatever the jump.
    private func resync(at ext: Int64) {
        let pending = frontier <= highestExt
        for i in 0..<capacity { slotExt[i] = -1 }
        frontier = ext
        // Skipped packets may have held media; picture-ID continuity decides at the next frame start.
        markBroken(media: pending)
    }

    private func markBroken(media: Bool) {
        if !skipping {
            skipping = true
            skippedMedia = false
        }
        if media { skippedMedia = true }
    }

    /// Whether a frame starting with picture ID `pictureID` directly follows the last completed frame,
    /// so the packets skipped before it carried no media.
    private func followsLastFrame(_ pictureID: Int32) -> Bool {
        guard pictureID >= 0, lastPictureID >= 0 else { return false }
        let mask: Int32 = lastPictureIDLong ? 0x7FFF : 0x7F
        return pictureID == (lastPictureID + 1) & mask
    }

    /// Releases complete frames (and skips broken ones) from the frontier onwards.
    private func assemble(now: UInt64) {
        if !synced {
            // Wait a little for an earlier frame start before treating the stream head as broken.
            // A key frame start needs nothing earlier; anything else may be preceded by late packets.
            let i = slot(frontier)
            let atStart = slotExt[i] == frontier && slotFrameStart[i] && slotLength[i] > 0
            guard atStart && slotKeyframe[i] || now &- firstArrival >= options.reorderWait else { return }
            synced = true
            if !atStart { markBroken(media: true) }
        }
        while frontier <= highestExt {
            let i = slot(frontier)
            guard slotExt[i] == frontier else {
                guard isGivenUp(frontier) else { return }  // still waiting for it
                markBroken(media: false)
                frontier += 1
                continue
            }
            if slotLength[i] == 0 {  // padding
                release(frontier)
                frontier += 1
                continue
            }
            guard slotFrameStart[i] else {
                // The frame's first packet is gone: drop the rest of it.
                markBroken(media: true)
                release(frontier)
                frontier += 1
                continue
            }
            if skipping {
                skipping = false
                if skippedMedia || !followsLastFrame(slotPictureID[i]) { frameBroken() }
            }
            // Find the marker packet of this frame.
            let timestamp = slotTimestamp[i]
            var end = frontier
            var complete = false
            while end <= highestExt && end - frontier < Int64(capacity) {
                let j = slot(end)
                guard slotExt[j] == end else {
                    if isGivenUp(end) {
                        break  // hole given up: frame broken
                    }
                    return  // wait for the hole to fill
                }
                if slotTimestamp[j] != timestamp || (end > frontier && slotFrameStart[j] && slotLength[j] > 0) {
                    end -= 1  // next frame began without a marker: this frame is incomplete
                    break
                }
                if slotMarker[j] {
                    complete = true
                    break
                }
                end += 1
            }
            if !complete {
                if end > highestExt { return }  // the rest has not arrived yet
                // Broken: drop this frame's packets and skip to the next frame start.
                var e = frontier
                while e <= end {
                    release(e)
                    e += 1
                }
                frontier = max(end + 1, frontier + 1)
                markBroken(media: true)
                continue
            }
            deliverVideo(from: frontier, through: end, now: now)
            frontier = end + 1
        }
    }

    private func frameBroken() {
        counters.framesDropped += 1
        waitingForKeyframe = true
        links.keyframes.want()
    }

    private func deliverVideo(from first: Int64, through last: Int64, now: UInt64) {
        let firstSlot = slot(first)
        let isKey = slotKeyframe[firstSlot]
        let timestamp = slotTimestamp[firstSlot]
        lastPictureID = slotPictureID[firstSlot]
        counters.framesAssembled += 1
        if waitingForKeyframe && !isKey {
            // Undecodable without its references: drop and keep asking for a key frame.
            counters.framesDropped += 1
            links.keyframes.want()
            var e = first
            while e <= last {
                release(e)
                e += 1
            }
            return
        }
        var total = 0
        var arrival: UInt64 = 0
        var e = first
        while e <= last {
            let j = slot(e)
            total += slotLength[j]
            arrival = max(arrival, slotArrival[j])
            e += 1
        }
        // A frame whose first packets arrived before anyone consumed frames has no bytes for them:
        // treat it as undecodable, as after a loss.
        if onFrame != nil {
            var complete = true
            var c = first
            while c <= last {
                if !slotHasData[slot(c)] { complete = false }
                c += 1
            }
            if !complete {
                counters.framesDropped += 1
                waitingForKeyframe = true
                links.keyframes.want()
                var e = first
                while e <= last {
                    release(e)
                    e += 1
                }
                return
            }
        }
        if isKey {
            waitingForKeyframe = false
            links.keyframes.satisfied()
            counters.keyframesReceived += 1
        }
        counters.framesDecodable += 1
        guard let onFrame else {
            // Nobody wants frames (an SFU forwards packets): free the slots without copying.
            var e = first
            while e <= last {
                slotExt[slot(e)] = -1
                e += 1
            }
            return
        }
        let data = [UInt8](unsafeUninitializedCapacity: total) { buffer, count in
            var w = 0
            var e = first
            while e <= last {
                let j = slot(e)
                let n = slotLength[j]
                if n > 0, let src = storage.baseAddress, let dst = buffer.baseAddress {
                    (dst + w).initialize(
                        from: (src + j * Self.slotSize).assumingMemoryBound(to: UInt8.self), count: n)
                }
                w += n
                slotExt[j] = -1
                e += 1
            }
            count = w
        }
        let frame = EncodedFrame(codec: .vp8, data: data, timestamp: timestamp, isKeyframe: isKey)
        onFrame(frame, timing(timestamp: timestamp, arrival: arrival))
    }

    // MARK: - Feedback in

    /// Records a sender report from this stream's sender: its NTP/RTP pair maps RTP time to wall time,
    /// and its arrival time gives LSR/DLSR for our receiver reports.
    public func handleSenderReport(ntp: NTPTime, rtpTimestamp: UInt32, now: UInt64) {
        links.handleSenderReport(ntp: ntp, rtpTimestamp: rtpTimestamp, now: now)
    }

    /// Records a sender report given its raw 64-bit NTP timestamp.
    public func handleSenderReport(ntp: UInt64, rtpTimestamp: UInt32, now: UInt64) {
        handleSenderReport(ntp: NTPTime(value: ntp), rtpTimestamp: rtpTimestamp, now: now)
    }

    /// The latest sender report of this stream: the sender's wall clock at one RTP timestamp (nil
    /// before any). An SFU lines up simulcast layers with it when it switches between them.
    public var senderReport: (ntp: NTPTime, rtpTimestamp: UInt32)? {
        let statistics = links.statistics
        return statistics.lastSRNTP.map { ($0, statistics.lastSRRTP) }
    }

    /// Asks for a key frame (PLI), e.g. when a recorder starts; throttled like every other request.
    public func requestKeyframe() {
        guard codec == .vp8 else { return }
        links.keyframes.want()
    }

    /// Asks for a key frame with the next tick, whatever this receiver's own throttle says: for a
    /// caller that throttles its requests itself (an SFU, per producer layer), where a second
    /// throttle here would hold a joiner's request for up to another interval.
    public func requestKeyframeNow() {
        guard codec == .vp8 else { return }
        links.keyframes.want()
        links.keyframes.allowNow()
    }

    // MARK: - Feedback out

    /// Runs timers: gives up old holes, then sends NACKs (every ``RTPReceiverOptions/nackInterval`` while
    /// packets are missing), PLIs (throttled, repeated while a key frame is awaited) and receiver reports.
    /// Each emitted compound starts with a receiver report (RFC 3550 §6.1, RFC 4585 §3.1).
    public func tick(now: UInt64, emitRTCP: (UnsafeMutableRawBufferPointer, Int) -> Void) {
        guard started else { return }
        // Holes out of time are given up first, so the assembler can move past them.
        if codec == .vp8, links.nack.expire(now: now, roundTripTime: roundTripTime) || !synced {
            assemble(now: now)
        }
        let clock = RTPLinkClock(now: now, roundTripTime: roundTripTime, baseExt: baseExt, highestExt: highestExt)
        guard links.tick(clock) else { return }
        var out = RTCPOutput(buffer: rtcpBuffer, end: 0, localSSRC: localSSRC, mediaSSRC: ssrc)
        do throws(RTCPError) { try links.writeRTCP(&out, clock) } catch {
            // Only a too-small buffer can fail; send what was written.
        }
        guard out.end > 0 else { return }
        emitRTCP(rtcpBuffer, out.end)
    }
}

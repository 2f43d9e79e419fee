import Glibc
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
    /// Quality of the received track without decoding (``ReceiveQuality``): fps, freezes, jitter-buffer
    /// delay, concealment and MOS, latency, with the counters above.
    public var quality = ReceiveQualitySnapshot(kind: "video")
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
/// Confined to the event-loop thread. The receiver itself keeps the stream state (RTX unwrap, one
/// codec inspect, sequence extension, dedupe); each accepted packet goes to its link chain
/// (``RTPReceiverLinks``) and to its codec's frame assembler (``VideoFrameAssembler``,
/// ``OpusFrameAssembler``), which copies it into a preallocated slot ring; the only allocation is
/// the `[UInt8]` of each delivered frame.
///
/// Video (VP8, H.264): frames are delivered in order, complete (S=1/PID=0 packet to the marker bit, no gaps)
/// and decodable: after a loss that breaks a frame, frames are dropped until the next key frame, which
/// is requested with PLIs (throttled, repeated while waiting). Audio (Opus): each packet is a frame and is
/// delivered on arrival; late packets are dropped and losses are skipped.
// Safe: loop-confined; its entry points assert `loop` in debug builds once a transport owns it.
public final class RTPReceiver: LoopConfined, @unchecked Sendable {
    /// The loop this object is confined to, once a transport owns it (nil when used alone, as in
    /// unit tests): its entry points assert, in debug builds only, that they run there.
    public internal(set) var loop: (any LoopConfinement)?

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
    /// The owning transport's timer deadline, lowered when this stream needs ``tick(now:emitRTCP:)``
    /// sooner than planned (nil for a receiver driven by its own caller).
    var tickDeadline: TickDeadline?
    /// The negotiated abs-capture-time extension id (0: none): when set, the first packet of each
    /// frame gives an end-to-end latency sample for ``RTPReceiverStats/quality``.
    public var captureTimeExtensionID: UInt8 = 0
    /// The wall clock (Unix ns) at a loop time, for latency samples; tests replace it.
    public var wallClockNanoseconds: (UInt64) -> UInt64 = { _ in realtimeNanoseconds() }
    /// Quality measurements, fed at frame completion (video) and playout (audio).
    private var quality: ReceiveQuality
    /// The default of ``measuresQuality``: `UNDERSTUDY_RECEIVE_QUALITY=0` turns it off for the
    /// process, for A/B runs of its cost.
    public static let measuresQualityByDefault: Bool =
        getenv("UNDERSTUDY_RECEIVE_QUALITY").map {
            String(cString: $0) != "0"
        } ?? true
    /// Whether ``RTPReceiverStats/quality`` is fed (off: its readings stay empty). Set before the
    /// first packet, on the loop thread (``PeerConnectionConfiguration/measuresReceiveQuality``).
    public var measuresQuality = RTPReceiver.measuresQualityByDefault
    /// Wall clock minus loop clock, read once a second rather than a clock call per frame.
    private var wallOffset: Int64 = 0
    private var wallOffsetAt: UInt64 = 0

    /// The wall clock (Unix ns) at loop time `now`, from an offset renewed every second.
    private func wallClock(at now: UInt64) -> UInt64 {
        if wallOffsetAt == 0 || now &- wallOffsetAt >= 1_000_000_000 {
            wallOffset = Int64(bitPattern: wallClockNanoseconds(now)) &- Int64(bitPattern: now)
            wallOffsetAt = now
        }
        return UInt64(bitPattern: Int64(bitPattern: now) &+ wallOffset)
    }

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
        let assembled = assemblyCounters
        s.framesAssembled = assembled.framesAssembled
        s.framesDecodable = assembled.framesDecodable
        s.framesDropped = assembled.framesDropped
        s.keyframesReceived = assembled.keyframesReceived
        s.packetsLate += assembled.packetsLate
        s.quality = quality.snapshot(
            packetsReceived: s.packetsReceived, packetsLost: s.packetsLost, nacksSent: s.nacksSent,
            plisSent: s.plisSent, firsSent: s.firsSent, jitterMilliseconds: s.jitter)
        return s
    }
    private var counters = RTPReceiverStats()
    private var assemblyCounters: RTPFrameAssemblyCounters {
        videoAssembler?.counters ?? audioAssembler?.counters ?? RTPFrameAssemblyCounters()
    }

    // Sequence tracking. Extended sequence numbers are biased by 2^16 so early reordering stays positive.
    private var started = false
    private var baseExt: Int64 = 0
    private var highestExt: Int64 = 0
    private var firstArrival: UInt64 = 0

    /// The stream's features as a chain: receive statistics and reports, NACK generator, key-frame
    /// requester (RTPLinkChain.swift).
    private var links: RTPReceiverLinks
    /// The codec's frame assembler (RTPFrameAssembler.swift): VP8 or H.264 for video, Opus otherwise (exactly
    /// one is set); it reaches the NACK and key-frame links through this receiver as its
    /// ``RTPFrameAssemblyContext``. Two `let`s rather than an enum: a packet's calls borrow the
    /// assembler, where binding an enum payload retained and released it for every packet.
    private let videoAssembler: VideoFrameAssembler?
    private let audioAssembler: OpusFrameAssembler?
    /// Packets the reorder window holds (video), 1 for audio.
    private let capacity: Int
    /// Which extended numbers were seen, for dedupe: a bit per number over the last `size` (the SRTP
    /// replay window's structure). 128 bytes for 1,024 numbers, where a ring of the numbers took
    /// 8 KB and cost a cache miss per packet once a process held thousands of receivers.
    private let seen: SRTPReplayWindow

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
        let video = codec.kind == .video
        capacity = video ? max(16, options.bufferPackets) : 1
        videoAssembler =
            video ? VideoFrameAssembler(capacity: capacity, reorderWait: options.reorderWait, codec: codec) : nil
        audioAssembler = video ? nil : OpusFrameAssembler()
        let ringSize = max(capacity, 1024)
        seen = SRTPReplayWindow(covering: ringSize)
        links = RTPReceiverLinks(
            statistics: ReceiveStatistics(
                ssrc: ssrc, clockRate: codec.clockRate, cname: options.cname, reportInterval: options.reportInterval,
                seed: seed ?? UInt64.random(in: .min ... .max)),
            nack: NACKGenerator(
                options: options, capacity: min(capacity, 256), tracksHoles: video, givenUpRing: ringSize),
            keyframes: KeyframeRequester(
                enabled: video && options.pli, interval: options.keyframeRequestInterval))
        rtcpBuffer = .allocate(byteCount: 1500, alignment: 16)
        quality = ReceiveQuality(kind: codec.kind, clockRate: codec.clockRate)
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
        assertInLoop()
        rtxSSRC = ssrc
        rtxPayloadType = payloadType
    }

    deinit {
        rtcpBuffer.deallocate()
    }

    /// H.264: parameter sets negotiated out of band (`sprop-parameter-sets`, as Annex B), used for IDR
    /// access units that arrive without their own. Loop thread.
    public func setH264ParameterSets(_ annexB: [UInt8]) {
        videoAssembler?.setParameterSets(annexB)
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
        assertInLoop()
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
        // One latency sample per frame: its first packet as sent (not a repair).
        if captureTimeExtensionID != 0, measuresQuality, !isRTX, info.startsFrame, !payload.isEmpty,
            let range = header.extensionElement(id: captureTimeExtensionID, in: packet),
            let ntp = AbsCaptureTime.captureTime(packet, range)
        {
            let captured = AbsCaptureTime.unixNanoseconds(ntp: ntp)
            let wall = wallClock(at: now)
            if captured > 0, wall >= captured { quality.latency(wall - captured) }
        }
        handle(
            seq: seq, timestamp: header.timestamp, marker: header.marker, payload: payload, info: info, now: now,
            retransmission: isRTX)
        // A first packet, a hole or a broken frame makes a timer due (a report, a NACK, a PLI).
        tickDeadline?.lower(to: nextTimer)
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
            firstArrival = now
        }
        // Numbers older than the window pass, as before: the reorder window judges them.
        if seen.check(UInt64(bitPattern: ext)) == .replayed {
            counters.packetsDuplicated += 1
            return
        }
        var resynced = false
        if let video = videoAssembler {
            if video.isLate(ext, now: now) {
                counters.packetsLate += 1
                return
            }
            // A jump past the whole window: nothing before it can still complete.
            resynced = video.jumpsPastWindow(ext)
        }
        if ext < baseExt { baseExt = ext }  // reordered ahead of the first packet
        seen.accept(UInt64(bitPattern: ext))
        if retransmission { counters.retransmissionsReceived += 1 }

        let previousHighest = highestExt
        if ext > highestExt { highestExt = ext }
        links.received(
            RTPReceiveEvent(
                ext: ext, previousHighest: previousHighest, timestamp: timestamp, isRepair: retransmission,
                sinceStart: now &- firstArrival, resynced: resynced),
            now: now)
        // A key frame's coded size: a change is a (simulcast) layer switch.
        if info.width > 0, info.isKeyframe, info.startsFrame, measuresQuality {
            quality.keyframe(width: info.width, height: info.height)
        }
        let packet = RTPAssemblyPacket(ext: ext, timestamp: timestamp, marker: marker, payload: payload, info: info)
        if let video = videoAssembler {
            video.insert(packet, now: now, context: self)
        } else {
            audioAssembler?.insert(packet, now: now, context: self)
        }
    }

    private func timing(timestamp: UInt32, arrival: UInt64) -> FrameTiming {
        FrameTiming(
            rtpTimestamp: timestamp, arrivalTime: arrival,
            ntpTime: links.statistics.ntpTime(of: timestamp, clockRate: codec.clockRate))
    }

    // MARK: - Feedback in

    /// Records a sender report from this stream's sender: its NTP/RTP pair maps RTP time to wall time,
    /// and its arrival time gives LSR/DLSR for our receiver reports.
    public func handleSenderReport(ntp: NTPTime, rtpTimestamp: UInt32, now: UInt64) {
        assertInLoop()
        links.handleSenderReport(ntp: ntp, rtpTimestamp: rtpTimestamp, now: now)
    }

    /// Records a sender report given its raw 64-bit NTP timestamp.
    public func handleSenderReport(ntp: UInt64, rtpTimestamp: UInt32, now: UInt64) {
        assertInLoop()
        handleSenderReport(ntp: NTPTime(value: ntp), rtpTimestamp: rtpTimestamp, now: now)
    }

    /// The latest sender report of this stream: the sender's wall clock at one RTP timestamp (nil
    /// before any), and that instant on our loop clock (through the sender's reports' least delay,
    /// ``SenderClockMapping``). An SFU lines up simulcast layers with it when it switches between
    /// them, and writes its own reports for the stream from it.
    public var senderReport: (ntp: NTPTime, rtpTimestamp: UInt32, localTime: UInt64)? {
        let statistics = links.statistics
        guard let ntp = statistics.lastSRNTP, let local = statistics.senderClock.localTime(of: ntp) else { return nil }
        return (ntp, statistics.lastSRRTP, local)
    }

    /// Asks for a key frame (PLI), e.g. when a recorder starts; throttled like every other request.
    public func requestKeyframe() {
        assertInLoop()
        guard codec.kind == .video else { return }
        links.keyframes.want()
        tickDeadline?.lower(to: nextTimer)
    }

    /// Asks for a key frame with the next tick, whatever this receiver's own throttle says: for a
    /// caller that throttles its requests itself (an SFU, per producer layer), where a second
    /// throttle here would hold a joiner's request for up to another interval.
    public func requestKeyframeNow() {
        assertInLoop()
        guard codec.kind == .video else { return }
        links.keyframes.want()
        links.keyframes.allowNow()
        tickDeadline?.lower(to: nextTimer)
    }

    // MARK: - Feedback out

    /// The loop time from which ``tick(now:emitRTCP:)`` has something to do: 0 (every tick) while
    /// holes are tracked, a key frame is wanted or the stream head is not settled; else when the next
    /// receiver report is due; `UInt64.max` before the first packet.
    var nextTimer: UInt64 {
        guard started else { return .max }
        if !links.nack.isEmpty || (links.keyframes.enabled && links.keyframes.wanted) { return 0 }
        if let video = videoAssembler, !video.synced { return 0 }
        return links.statistics.nextReportTime
    }

    /// Runs timers: gives up old holes, then sends NACKs (every ``RTPReceiverOptions/nackInterval`` while
    /// packets are missing), PLIs (throttled, repeated while a key frame is awaited) and receiver reports.
    /// Each emitted compound starts with a receiver report (RFC 3550 §6.1, RFC 4585 §3.1).
    public func tick(now: UInt64, emitRTCP: (UnsafeMutableRawBufferPointer, Int) -> Void) {
        guard started else { return }
        // Holes out of time are given up first, so the assembler can move past them.
        if let video = videoAssembler,
            links.nack.expire(now: now, roundTripTime: roundTripTime) || !video.synced
        {
            video.advance(now: now, context: self)
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

extension RTPReceiver: RTPFrameAssemblyContext {
    func isGivenUp(_ ext: Int64) -> Bool { links.nack.isGivenUp(ext) }
    func giveUp(_ ext: Int64) { links.nack.markGivenUp(ext) }
    func forgetHoles(before ext: Int64) { links.nack.forget(before: ext) }
    func needKeyframe() { links.keyframes.want() }
    func keyframeDelivered() { links.keyframes.satisfied() }
    var consumesFrames: Bool { onFrame != nil }
    func deliver(_ frame: EncodedFrame, arrival: UInt64) {
        onFrame?(frame, timing(timestamp: frame.timestamp, arrival: arrival))
    }
    func frameCompleted(timestamp: UInt32, now: UInt64) {
        if measuresQuality { quality.videoFrame(timestamp: timestamp, arrival: now) }
    }
    func audioPlayed(ext: Int64, timestamp: UInt32, now: UInt64) {
        if measuresQuality { quality.audioPacket(sequence: ext, timestamp: timestamp, arrival: now) }
    }
}

import RTCWire

// Frame assembly (depacketizing) as its own unit per codec, after pion's `samplebuilder` and
// aiortc's `jitterbuffer.py`: it takes the packets a receive stream accepted (sequence already
// extended and deduplicated, codec header read once into an `RTPPayloadInfo` by the codec's
// `RTPPayloadFormat`) and hands out whole frames in order. It talks to the rest of the stream only
// through ``RTPFrameAssemblyContext``: which holes the NACK generator gave up, which it must give up
// itself, when a key frame is needed and when one arrived, and where frames go. The context is a
// generic parameter, so every call is specialized (no existential, no allocation per packet).

/// What a frame assembler needs from the stream that owns it (``RTPReceiver`` and its link chain;
/// a recording double in tests).
protocol RTPFrameAssemblyContext: AnyObject {
    /// Whether the stream stopped waiting for packet `ext` (the NACK generator gave it up).
    func isGivenUp(_ ext: Int64) -> Bool
    /// The assembler moves past `ext`, which has not arrived: stop waiting for it.
    func giveUp(_ ext: Int64)
    /// Holes before `ext` no longer matter (the assembler moved past them).
    func forgetHoles(before ext: Int64)
    /// A frame was lost or is undecodable: a key frame is needed.
    func needKeyframe()
    /// A key frame was delivered: stop asking for one.
    func keyframeDelivered()
    /// Whether anyone consumes frames; without a consumer (an SFU forwards packets) no payload byte
    /// is copied and no frame is built.
    var consumesFrames: Bool { get }
    /// One complete, decodable frame, in order; `arrival` is when its last packet arrived.
    func deliver(_ frame: EncodedFrame, arrival: UInt64)
    /// A video frame became decodable in order at `now` (called whether or not frames are consumed):
    /// the quality measurements' frame clock.
    func frameCompleted(timestamp: UInt32, now: UInt64)
    /// An audio packet (`ext`) was played in order at `now`, whether or not frames are consumed.
    func audioPlayed(ext: Int64, timestamp: UInt32, now: UInt64)
}

extension RTPFrameAssemblyContext {
    func frameCompleted(timestamp: UInt32, now: UInt64) {}
    func audioPlayed(ext: Int64, timestamp: UInt32, now: UInt64) {}
}

/// Counters of a frame assembler, merged into ``RTPReceiverStats``.
struct RTPFrameAssemblyCounters: Equatable {
    /// Complete frames assembled from packets.
    var framesAssembled: UInt64 = 0
    /// Frames delivered as decodable.
    var framesDecodable: UInt64 = 0
    /// Frames dropped: broken by loss, or undecodable while waiting for a key frame.
    var framesDropped: UInt64 = 0
    /// Key frames delivered.
    var keyframesReceived: UInt64 = 0
    /// Packets that arrived after their frame was released or given up.
    var packetsLate: UInt64 = 0
}

/// One packet as the assembler takes it: plain values and a borrowed payload (valid during the call).
struct RTPAssemblyPacket {
    /// Extended sequence number (biased by 2^16, see ``RTPReceiver``).
    let ext: Int64
    let timestamp: UInt32
    let marker: Bool
    /// The codec payload, codec header included.
    let payload: UnsafeRawBufferPointer
    /// The codec header, read once.
    let info: RTPPayloadInfo
}

/// Opus (and any codec whose every packet is a frame decodable alone): each packet is delivered on
/// arrival; a packet older than the last delivered one is late and dropped; losses are skipped.
final class OpusFrameAssembler {
    private(set) var counters = RTPFrameAssemblyCounters()
    /// One past the last delivered packet.
    private var frontier: Int64 = 0
    private var started = false

    init() {}

    func insert<Context: RTPFrameAssemblyContext>(_ packet: RTPAssemblyPacket, now: UInt64, context: Context) {
        if started, packet.ext < frontier {
            counters.packetsLate += 1
            return
        }
        started = true
        frontier = packet.ext + 1
        counters.framesAssembled += 1
        counters.framesDecodable += 1
        context.audioPlayed(ext: packet.ext, timestamp: packet.timestamp, now: now)
        // Without a consumer of frames (an SFU forwards packets), skip the per-packet copy.
        guard context.consumesFrames else { return }
        let frame = EncodedFrame(
            codec: .opus, data: [UInt8](packet.payload), timestamp: packet.timestamp, isKeyframe: true,
            duration: UInt32(clamping: (try? OpusTOC.packetDuration(packet.payload)) ?? 0))
        context.deliver(frame, arrival: now)
    }
}

/// Video frames from packets (VP8 and H.264): held in a preallocated slot ring for reordering,
/// released in order when complete, with key-frame discipline.
///
/// VP8: a frame is the S=1/partition-0 packet through the marker bit, one timestamp, no hole.
/// H.264 (RFC 6184): an access unit is the packets of one timestamp through the marker bit, no hole;
/// its first packet is the one after the previous frame's marker (or a new timestamp), or one whose
/// first NAL unit certainly begins an access unit (an AUD, an SPS or a picture's first slice) — after
/// a hole nothing else is taken as a start. The payloads are kept whole and turned into one Annex B
/// access unit on delivery (FU-A fragments joined, STAP-A split); an access unit is a key frame when
/// it has an IDR slice and its parameter sets, which the assembler keeps from the last key frame (or
/// from `sprop-parameter-sets`) and puts in front of an IDR access unit that came without them.
///
/// Common: After a loss that breaks a frame, frames are dropped until the next key frame, which
/// is asked for through the context; a hole is waited for until the context gives it up (NACK out of
/// retries or time). The only allocation is the `[UInt8]` of each delivered frame.
final class VideoFrameAssembler {
    static let slotSize = 1500

    /// The codec whose packets this assembler takes (`.vp8`, `.vp9`, `.h264` or `.av1`).
    let codec: MediaCodec
    /// AV1: joins a temporal unit's OBU elements (buffers reused from unit to unit).
    private var av1Builder = AV1TemporalUnitBuilder()
    /// H.264: the last SPS and PPS seen (Annex B), put in front of an IDR access unit without them.
    private(set) var h264ParameterSets: [UInt8] = []
    /// H.264: the last packet released at the frontier (present), to tell whether the next one
    /// starts an access unit.
    private var releasedExt: Int64 = -1
    private var releasedTimestamp: UInt32 = 0
    private var releasedMarker = false

    /// Packets the ring holds (the reorder window).
    let capacity: Int
    /// Before the first frame start is found, how long earlier (reordered) packets are waited for.
    let reorderWait: UInt64
    private(set) var counters = RTPFrameAssemblyCounters()

    /// The next packet the assembler needs.
    private(set) var frontier: Int64 = 0
    /// The highest packet inserted.
    private var highest: Int64 = 0
    private var started = false
    private var firstArrival: UInt64 = 0

    private let storage: UnsafeMutableRawBufferPointer
    /// What the ring knows of one packet.
    private struct Slot {
        /// Extended sequence number; -1 marks an empty slot.
        var ext: Int64 = -1
        var timestamp: UInt32 = 0
        var marker = false
        var frameStart = false
        var keyframe = false
        /// VP9: the packet begins a layer frame (B bit) of a picture with layer indices; a picture of
        /// several layer frames (spatial SVC) is delivered as a superframe.
        var layerStart = false
        /// Whether the payload bytes were kept (only while someone consumes frames).
        var hasData = false
        var pictureID: Int32 = -1
        var length = 0
        var arrival: UInt64 = 0
    }
    /// Slots by extended sequence number modulo capacity. Raw memory rather than arrays: one
    /// packet writes one slot, without the uniqueness and bounds checks of nine arrays.
    private let slots: UnsafeMutablePointer<Slot>
    /// The marker search of the frame at ``frontier`` resumes at `scannedThrough` (every packet
    /// from the frontier up to it is present, of one timestamp, without a marker), so a frame of
    /// n packets costs n slot visits, not n²/2. Valid while `scannedFrontier == frontier`.
    private var scannedFrontier: Int64 = -1
    private var scannedThrough: Int64 = 0

    // Key-frame discipline.
    private var waitingForKeyframe = true
    private var skipping = false  // inside a broken frame: dropping until the next frame start
    // Until a frame start is found, packets reordered ahead of the first one still count.
    private(set) var synced = false
    private var skippedMedia = false
    private var lastPictureID: Int32 = -1
    private var lastPictureIDLong = true

    init(capacity: Int, reorderWait: UInt64, codec: MediaCodec = .vp8) {
        self.codec = codec
        self.capacity = max(16, capacity)
        self.reorderWait = reorderWait
        storage = .allocate(byteCount: self.capacity * Self.slotSize, alignment: 16)
        slots = .allocate(capacity: self.capacity)
        slots.initialize(repeating: Slot(), count: self.capacity)
    }

    deinit {
        storage.deallocate()
        slots.deallocate()
    }

    /// H.264: parameter sets known out of band (`sprop-parameter-sets`, Annex B).
    func setParameterSets(_ annexB: [UInt8]) {
        if !annexB.isEmpty { h264ParameterSets = annexB }
    }

    /// Whether a new (not duplicate) packet `ext` comes too late: its frame was released or given
    /// up. The first call starts the stream at `ext`. Before the first frame start is found, a packet
    /// reordered ahead of the first one moves the start back instead (when the window still holds
    /// it). The caller counts a late packet.
    func isLate(_ ext: Int64, now: UInt64) -> Bool {
        if !started {
            started = true
            frontier = ext
            highest = ext
            firstArrival = now
            return false
        }
        if !synced, ext < frontier, highest - ext < Int64(capacity) { frontier = ext }
        return ext < frontier
    }

    /// Whether `ext` jumps past the whole window from the highest packet: then nothing before it
    /// can complete, and the assembler restarts at it (``insert(_:now:context:)`` does so).
    func jumpsPastWindow(_ ext: Int64) -> Bool { started && ext - highest > Int64(capacity) }

    /// Takes one accepted packet and releases every frame it completes.
    func insert<Context: RTPFrameAssemblyContext>(_ packet: RTPAssemblyPacket, now: UInt64, context: Context) {
        if !started { _ = isLate(packet.ext, now: now) }
        if jumpsPastWindow(packet.ext) { resync(at: packet.ext) }
        if packet.ext > highest { highest = packet.ext }
        store(packet, now: now, context: context)
        assemble(now: now, context: context)
    }

    /// Runs after the context gave up holes (or while still unsynced): moves past what is no longer
    /// waited for.
    func advance<Context: RTPFrameAssemblyContext>(now: UInt64, context: Context) {
        guard started else { return }
        assemble(now: now, context: context)
    }

    /// The slot of `ext`; in range whatever `ext` (the ring is raw memory).
    private func slot(_ ext: Int64) -> Int { Int(UInt64(bitPattern: ext) % UInt64(capacity)) }

    private func store<Context: RTPFrameAssemblyContext>(_ packet: RTPAssemblyPacket, now: UInt64, context: Context) {
        let ext = packet.ext
        // Keep the window bounded: packets too far ahead push the assembler forward.
        if ext >= frontier + Int64(capacity) {
            forceAdvance(to: ext - Int64(capacity) + 1, now: now, context: context)
        }
        let i = slot(ext)
        let info = packet.info
        var entry = Slot(ext: ext, timestamp: packet.timestamp, marker: packet.marker, arrival: now)
        if !packet.payload.isEmpty {
            let media = UnsafeRawBufferPointer(rebasing: packet.payload[info.headerLength...])
            entry.length = min(media.count, Self.slotSize)
            // Payload bytes are only kept when someone assembles frames (an SFU forwards packets instead).
            if context.consumesFrames, let src = media.baseAddress, let dst = storage.baseAddress, entry.length > 0 {
                (dst + i * Self.slotSize).copyMemory(from: src, byteCount: entry.length)
                entry.hasData = true
            } else {
                entry.hasData = entry.length == 0
            }
            entry.frameStart = info.startsFrame
            entry.keyframe = info.isKeyframe
            entry.layerStart = info.hasLayerIndices && info.beginsLayerFrame
            entry.pictureID = info.hasPictureID ? Int32(info.pictureID) : -1
            if info.hasPictureID { lastPictureIDLong = info.pictureIDIs15Bit }
        }
        slots[i] = entry
    }

    private func release(_ ext: Int64) {
        let i = slot(ext)
        if slots[i].ext == ext {
            noteReleased(slots[i])
            slots[i].ext = -1
        }
    }

    private func noteReleased(_ slot: Slot) {
        releasedExt = slot.ext
        releasedTimestamp = slot.timestamp
        releasedMarker = slot.marker
    }

    /// Whether the present packet `first` at the frontier begins a frame.
    private func beginsFrame(_ first: Slot) -> Bool {
        guard codec.framesEndByTimestamp else { return first.frameStart }
        if first.frameStart { return true }
        return releasedExt == first.ext - 1 && (releasedMarker || releasedTimestamp != first.timestamp)
    }

    /// Gives up every packet before `target` that has not arrived, then assembles.
    private func forceAdvance<Context: RTPFrameAssemblyContext>(to target: Int64, now: UInt64, context: Context) {
        var e = frontier
        while e < target {
            if slots[slot(e)].ext != e && !context.isGivenUp(e) { context.giveUp(e) }
            e += 1
        }
        context.forgetHoles(before: target)
        assemble(now: now, context: context)
        // If the assembler still waits before target (a frame spanning the whole window), drop it.
        while frontier < target {
            release(frontier)
            frontier += 1
            markBroken(media: true)
        }
    }

    /// Drops everything buffered and restarts at `ext`, in O(window) whatever the jump.
    private func resync(at ext: Int64) {
        let pending = frontier <= highest
        for i in 0..<capacity { slots[i].ext = -1 }
        frontier = ext
        scannedFrontier = -1
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
    private func assemble<Context: RTPFrameAssemblyContext>(now: UInt64, context: Context) {
        if !synced {
            // Wait a little for an earlier frame start before treating the stream head as broken.
            // A key frame start needs nothing earlier; anything else may be preceded by late packets.
            let head = slots[slot(frontier)]
            let atStart = head.ext == frontier && head.frameStart && head.length > 0
            guard atStart && head.keyframe || now &- firstArrival >= reorderWait else { return }
            synced = true
            if !atStart { markBroken(media: true) }
        }
        while frontier <= highest {
            let first = slots[slot(frontier)]
            guard first.ext == frontier else {
                guard context.isGivenUp(frontier) else { return }  // still waiting for it
                markBroken(media: false)
                frontier += 1
                continue
            }
            if first.length == 0 {  // padding
                release(frontier)
                frontier += 1
                continue
            }
            guard beginsFrame(first) else {
                // The frame's first packet is gone: drop the rest of it.
                markBroken(media: true)
                release(frontier)
                frontier += 1
                continue
            }
            if skipping {
                skipping = false
                if skippedMedia || !followsLastFrame(first.pictureID) { frameBroken(context) }
            }
            // Find the marker packet of this frame, from where the last search of it stopped.
            let timestamp = first.timestamp
            var end = scannedFrontier == frontier ? scannedThrough : frontier
            var complete = false
            while end <= highest && end - frontier < Int64(capacity) {
                let packet = slots[slot(end)]
                guard packet.ext == end else {
                    if context.isGivenUp(end) { break }  // hole given up: frame broken
                    remember(scannedThrough: end)
                    return  // wait for the hole to fill
                }
                // H.264 tells access units apart by timestamp only: a picture's first slice may follow
                // its parameter sets within one access unit.
                if packet.timestamp != timestamp
                    || (!codec.framesEndByTimestamp && end > frontier && packet.frameStart && packet.length > 0)
                {
                    end -= 1  // next frame began without a marker: this frame is incomplete
                    break
                }
                if packet.marker {
                    complete = true
                    break
                }
                end += 1
            }
            if !complete {
                if end > highest {  // the rest has not arrived yet
                    remember(scannedThrough: end)
                    return
                }
                // Broken: drop this frame's packets and skip to the next frame start.
                releaseRange(frontier, end)
                frontier = max(end + 1, frontier + 1)
                markBroken(media: true)
                continue
            }
            deliver(from: frontier, through: end, now: now, context: context)
            frontier = end + 1
        }
    }

    private func remember(scannedThrough end: Int64) {
        scannedFrontier = frontier
        scannedThrough = end
    }

    private func frameBroken<Context: RTPFrameAssemblyContext>(_ context: Context) {
        counters.framesDropped += 1
        waitingForKeyframe = true
        context.needKeyframe()
    }

    private func releaseRange(_ first: Int64, _ last: Int64) {
        var e = first
        while e <= last {
            release(e)
            e += 1
        }
    }

    private func deliver<Context: RTPFrameAssemblyContext>(
        from first: Int64, through last: Int64, now: UInt64, context: Context
    ) {
        if codec == .h264 {
            deliverAccessUnit(from: first, through: last, now: now, context: context)
            return
        }
        if codec == .av1 {
            deliverTemporalUnit(from: first, through: last, now: now, context: context)
            return
        }
        let head = slots[slot(first)]
        let isKey = head.keyframe
        let timestamp = head.timestamp
        lastPictureID = head.pictureID
        counters.framesAssembled += 1
        guard admits(key: isKey, context: context) else {
            releaseRange(first, last)
            return
        }
        let consumes = context.consumesFrames
        let packets = scan(from: first, through: last)
        var total = packets.bytes
        let layerFrames = packets.layerFrames
        // VP9 spatial SVC: the layer frames of one picture, joined, need a superframe index
        // (VP9 specification, annex B) for a decoder to see more than the first one.
        let superframe = codec == .vp9 && layerFrames > 1 && layerFrames <= 8
        if superframe { total += 2 + 4 * layerFrames }
        // A frame whose first packets arrived before anyone consumed frames has no bytes for them:
        // treat it as undecodable, as after a loss.
        if consumes, !packets.hasAllBytes {
            frameBroken(context)
            releaseRange(first, last)
            return
        }
        completed(key: isKey, timestamp: timestamp, now: now, context: context)
        guard consumes else {
            releaseRange(first, last)
            return
        }
        let data = [UInt8](unsafeUninitializedCapacity: total) { buffer, count in
            var w = 0
            var e = first
            while e <= last {
                let j = slot(e)
                let n = slots[j].length
                if n > 0, let src = storage.baseAddress, let dst = buffer.baseAddress {
                    (dst + w).initialize(
                        from: (src + j * Self.slotSize).assumingMemoryBound(to: UInt8.self), count: n)
                }
                w += n
                slots[j].ext = -1
                e += 1
            }
            if superframe, let dst = buffer.baseAddress {
                w = writeSuperframeIndex(from: first, through: last, frames: layerFrames, into: dst, at: w)
            }
            count = w
        }
        context.deliver(
            EncodedFrame(codec: codec, data: data, timestamp: timestamp, isKeyframe: isKey), arrival: packets.arrival)
    }

    /// What the packets of one frame say together, read in one pass before the frame is built.
    private struct FrameScan {
        /// Payload bytes held.
        var bytes = 0
        /// The latest arrival.
        var arrival: UInt64 = 0
        /// Every packet kept its bytes (none arrived before frames were consumed).
        var hasAllBytes = true
        /// A packet was flagged as part of a key frame.
        var key = false
        /// Packets that start a layer frame (VP9 spatial layers).
        var layerFrames = 0
    }

    private func scan(from first: Int64, through last: Int64) -> FrameScan {
        var s = FrameScan()
        var e = first
        while e <= last {
            let packet = slots[slot(e)]
            s.bytes += packet.length
            s.arrival = max(s.arrival, packet.arrival)
            if !packet.hasData { s.hasAllBytes = false }
            s.key = s.key || packet.keyframe
            if packet.layerStart { s.layerFrames += 1 }
            e += 1
        }
        return s
    }

    /// Whether a frame may be delivered: while a key frame is awaited, a frame that is not one is
    /// undecodable without its references, so it is dropped and a key frame asked for again.
    private func admits<Context: RTPFrameAssemblyContext>(key: Bool, context: Context) -> Bool {
        guard waitingForKeyframe && !key else { return true }
        counters.framesDropped += 1
        context.needKeyframe()
        return false
    }

    /// Counts a decodable frame (a key frame ends the wait for one) and tells the context.
    private func completed<Context: RTPFrameAssemblyContext>(
        key: Bool, timestamp: UInt32, now: UInt64, context: Context
    ) {
        if key {
            waitingForKeyframe = false
            context.keyframeDelivered()
            counters.keyframesReceived += 1
        }
        counters.framesDecodable += 1
        context.frameCompleted(timestamp: timestamp, now: now)
    }

    /// Appends the superframe index of the layer frames in `first...last` at `at` (4-byte sizes,
    /// little-endian, between two marker bytes); returns the new end. Reads slot lengths and layer
    /// starts only, so it runs after the bytes were copied.
    private func writeSuperframeIndex(
        from first: Int64, through last: Int64, frames: Int, into dst: UnsafeMutablePointer<UInt8>, at: Int
    ) -> Int {
        let marker = UInt8(0xC0 | 3 << 3 | (frames - 1))
        var w = at
        dst[w] = marker
        w += 1
        var size = 0
        var e = first
        var started = false
        func put(_ value: Int) {
            for k in 0..<4 { dst[w + k] = UInt8(truncatingIfNeeded: value >> (8 * k)) }
            w += 4
        }
        while e <= last {
            let j = slot(e)
            if slots[j].layerStart, started {
                put(size)
                size = 0
            }
            started = started || slots[j].layerStart
            size += slots[j].length
            e += 1
        }
        put(size)
        dst[w] = marker
        return w + 1
    }

    /// The slot's payload bytes.
    private func payload(_ j: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: storage.baseAddress.map { $0 + j * Self.slotSize }, count: slots[j].length)
    }

    /// Runs `writer` over the payloads of packets `first...last`.
    private func writeAccessUnit(_ writer: inout H264PayloadFormat.AnnexBWriter, from first: Int64, through last: Int64)
    {
        var e = first
        while e <= last {
            writer.append(payload(slot(e)))
            e += 1
        }
        writer.finish()
    }

    /// H.264: one access unit from the packets `first...last` (complete, one timestamp), as Annex B.
    private func deliverAccessUnit<Context: RTPFrameAssemblyContext>(
        from first: Int64, through last: Int64, now: UInt64, context: Context
    ) {
        let timestamp = slots[slot(first)].timestamp
        counters.framesAssembled += 1
        let packets = scan(from: first, through: last)
        // Without a consumer the payload bytes were not kept: judge the frame by its packets' flags.
        guard context.consumesFrames else {
            if admits(key: packets.key, context: context) {
                completed(key: packets.key, timestamp: timestamp, now: now, context: context)
            }
            releaseRange(first, last)
            return
        }
        guard packets.hasAllBytes else {
            frameBroken(context)
            releaseRange(first, last)
            return
        }
        var counter = H264PayloadFormat.AnnexBWriter(output: nil)
        writeAccessUnit(&counter, from: first, through: last)
        if counter.sawNonContinuousFragment || counter.length == 0 {
            // A fragment without its start or end: the access unit is damaged.
            frameBroken(context)
            releaseRange(first, last)
            return
        }
        // An IDR access unit is a key frame with its parameter sets, in band or kept from before.
        var prefix: [UInt8] = []
        var isKey = false
        if counter.hasIDR {
            if counter.hasParameterSets {
                isKey = true
            } else if !h264ParameterSets.isEmpty {
                isKey = true
                prefix = h264ParameterSets
            }
        }
        guard admits(key: isKey, context: context) else {
            releaseRange(first, last)
            return
        }
        let total = prefix.count + counter.length
        var keptSets = false
        let data = [UInt8](unsafeUninitializedCapacity: total) { buffer, count in
            let out = UnsafeMutableRawBufferPointer(buffer)
            prefix.withUnsafeBytes { p in
                if let src = p.baseAddress, let dst = out.baseAddress, !p.isEmpty {
                    dst.copyMemory(from: src, byteCount: p.count)
                }
            }
            var writer = H264PayloadFormat.AnnexBWriter(
                output: UnsafeMutableRawBufferPointer(rebasing: out[prefix.count...]))
            writeAccessUnit(&writer, from: first, through: last)
            count = prefix.count + writer.length
            keptSets = writer.hasParameterSets
        }
        releaseRange(first, last)
        if keptSets { rememberParameterSets(data) }
        completed(key: isKey, timestamp: timestamp, now: now, context: context)
        context.deliver(
            EncodedFrame(codec: .h264, data: data, timestamp: timestamp, isKeyframe: isKey), arrival: packets.arrival)
    }

    /// AV1: one temporal unit from the packets `first...last` (complete, one timestamp), its OBUs in
    /// the low-overhead format. A key frame is a unit that starts a coded video sequence (the `N`
    /// bit) and holds its sequence header.
    private func deliverTemporalUnit<Context: RTPFrameAssemblyContext>(
        from first: Int64, through last: Int64, now: UInt64, context: Context
    ) {
        let timestamp = slots[slot(first)].timestamp
        counters.framesAssembled += 1
        let packets = scan(from: first, through: last)
        var key = packets.key
        let consumes = context.consumesFrames
        if consumes {
            guard packets.hasAllBytes else {
                frameBroken(context)
                releaseRange(first, last)
                return
            }
            av1Builder.reset()
            var e = first
            while e <= last {
                av1Builder.append(payload(slot(e)))
                e += 1
            }
            av1Builder.finish()
            if av1Builder.malformed || av1Builder.encodedLength == 0 {
                frameBroken(context)
                releaseRange(first, last)
                return
            }
            key = key && av1Builder.hasSequenceHeader
        }
        releaseRange(first, last)
        guard admits(key: key, context: context) else { return }
        completed(key: key, timestamp: timestamp, now: now, context: context)
        guard consumes else { return }
        let data = [UInt8](unsafeUninitializedCapacity: av1Builder.encodedLength) { buffer, count in
            count = av1Builder.write(into: UnsafeMutableRawBufferPointer(buffer))
        }
        context.deliver(
            EncodedFrame(codec: .av1, data: data, timestamp: timestamp, isKeyframe: key), arrival: packets.arrival)
    }

    /// Keeps the SPS and PPS units of an access unit (Annex B) for later IDR access units without them.
    private func rememberParameterSets(_ accessUnit: [UInt8]) {
        var sets: [UInt8] = []
        accessUnit.withUnsafeBytes { bytes in
            H264AnnexB.forEachUnit(bytes) { unit in
                let t = unit[0] & 0x1F
                if t == H264NALType.sps || t == H264NALType.pps {
                    sets += [0, 0, 0, 1]
                    sets += unit
                }
            }
        }
        if !sets.isEmpty, sets != h264ParameterSets { h264ParameterSets = sets }
    }
}

extension MediaCodec {
    /// Whether a frame's packets are told apart by timestamp and marker only, with no start bit
    /// that marks every frame's first packet (H.264 access units, AV1 temporal units).
    var framesEndByTimestamp: Bool { self == .h264 || self == .av1 }
}

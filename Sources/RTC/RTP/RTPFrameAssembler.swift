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
        // Without a consumer of frames (an SFU forwards packets), skip the per-packet copy.
        guard context.consumesFrames else { return }
        let frame = EncodedFrame(
            codec: .opus, data: [UInt8](packet.payload), timestamp: packet.timestamp, isKeyframe: true,
            duration: UInt32(clamping: (try? OpusTOC.packetDuration(packet.payload)) ?? 0))
        context.deliver(frame, arrival: now)
    }
}

/// VP8 frames from packets: held in a preallocated slot ring for reordering, released in order when
/// complete (the S=1/partition-0 packet through the marker bit, one timestamp, no hole), with key-frame
/// discipline. After a loss that breaks a frame, frames are dropped until the next key frame, which
/// is asked for through the context; a hole is waited for until the context gives it up (NACK out of
/// retries or time). The only allocation is the `[UInt8]` of each delivered frame.
final class VP8FrameAssembler {
    static let slotSize = 1500

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
    // Slots by extended sequence number modulo capacity; slotExt == -1 marks an empty slot.
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

    // Key-frame discipline.
    private var waitingForKeyframe = true
    private var skipping = false  // inside a broken frame: dropping until the next frame start
    // Until a frame start is found, packets reordered ahead of the first one still count.
    private(set) var synced = false
    private var skippedMedia = false
    private var lastPictureID: Int32 = -1
    private var lastPictureIDLong = true

    init(capacity: Int, reorderWait: UInt64) {
        self.capacity = max(16, capacity)
        self.reorderWait = reorderWait
        storage = .allocate(byteCount: self.capacity * Self.slotSize, alignment: 16)
        slotExt = Array(repeating: -1, count: self.capacity)
        slotTimestamp = Array(repeating: 0, count: self.capacity)
        slotMarker = Array(repeating: false, count: self.capacity)
        slotFrameStart = Array(repeating: false, count: self.capacity)
        slotKeyframe = Array(repeating: false, count: self.capacity)
        slotPictureID = Array(repeating: -1, count: self.capacity)
        slotLength = Array(repeating: 0, count: self.capacity)
        slotHasData = Array(repeating: false, count: self.capacity)
        slotArrival = Array(repeating: 0, count: self.capacity)
    }

    deinit { storage.deallocate() }

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

    private func slot(_ ext: Int64) -> Int { Int(ext % Int64(capacity)) }

    private func store<Context: RTPFrameAssemblyContext>(_ packet: RTPAssemblyPacket, now: UInt64, context: Context) {
        let ext = packet.ext
        // Keep the window bounded: packets too far ahead push the assembler forward.
        if ext >= frontier + Int64(capacity) {
            forceAdvance(to: ext - Int64(capacity) + 1, now: now, context: context)
        }
        let i = slot(ext)
        let info = packet.info
        var length = 0
        var start = false
        var key = false
        var pictureID: Int32 = -1
        if !packet.payload.isEmpty {
            let media = UnsafeRawBufferPointer(rebasing: packet.payload[info.headerLength...])
            length = min(media.count, Self.slotSize)
            // Payload bytes are only kept when someone assembles frames (an SFU forwards packets instead).
            if context.consumesFrames, let src = media.baseAddress, let dst = storage.baseAddress, length > 0 {
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
        slotTimestamp[i] = packet.timestamp
        slotMarker[i] = packet.marker
        slotFrameStart[i] = start
        slotKeyframe[i] = key
        slotPictureID[i] = pictureID
        slotLength[i] = length
        slotArrival[i] = now
    }

    private func release(_ ext: Int64) {
        let i = slot(ext)
        if slotExt[i] == ext { slotExt[i] = -1 }
    }

    /// Gives up every packet before `target` that has not arrived, then assembles.
    private func forceAdvance<Context: RTPFrameAssemblyContext>(to target: Int64, now: UInt64, context: Context) {
        var e = frontier
        while e < target {
            if slotExt[slot(e)] != e && !context.isGivenUp(e) { context.giveUp(e) }
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
    private func assemble<Context: RTPFrameAssemblyContext>(now: UInt64, context: Context) {
        if !synced {
            // Wait a little for an earlier frame start before treating the stream head as broken.
            // A key frame start needs nothing earlier; anything else may be preceded by late packets.
            let i = slot(frontier)
            let atStart = slotExt[i] == frontier && slotFrameStart[i] && slotLength[i] > 0
            guard atStart && slotKeyframe[i] || now &- firstArrival >= reorderWait else { return }
            synced = true
            if !atStart { markBroken(media: true) }
        }
        while frontier <= highest {
            let i = slot(frontier)
            guard slotExt[i] == frontier else {
                guard context.isGivenUp(frontier) else { return }  // still waiting for it
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
                if skippedMedia || !followsLastFrame(slotPictureID[i]) { frameBroken(context) }
            }
            // Find the marker packet of this frame.
            let timestamp = slotTimestamp[i]
            var end = frontier
            var complete = false
            while end <= highest && end - frontier < Int64(capacity) {
                let j = slot(end)
                guard slotExt[j] == end else {
                    if context.isGivenUp(end) { break }  // hole given up: frame broken
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
                if end > highest { return }  // the rest has not arrived yet
                // Broken: drop this frame's packets and skip to the next frame start.
                releaseRange(frontier, end)
                frontier = max(end + 1, frontier + 1)
                markBroken(media: true)
                continue
            }
            deliver(from: frontier, through: end, context: context)
            frontier = end + 1
        }
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

    private func deliver<Context: RTPFrameAssemblyContext>(from first: Int64, through last: Int64, context: Context) {
        let firstSlot = slot(first)
        let isKey = slotKeyframe[firstSlot]
        let timestamp = slotTimestamp[firstSlot]
        lastPictureID = slotPictureID[firstSlot]
        counters.framesAssembled += 1
        if waitingForKeyframe && !isKey {
            // Undecodable without its references: drop and keep asking for a key frame.
            counters.framesDropped += 1
            context.needKeyframe()
            releaseRange(first, last)
            return
        }
        let consumes = context.consumesFrames
        var total = 0
        var arrival: UInt64 = 0
        var hasAllBytes = true
        var e = first
        while e <= last {
            let j = slot(e)
            total += slotLength[j]
            arrival = max(arrival, slotArrival[j])
            if !slotHasData[j] { hasAllBytes = false }
            e += 1
        }
        // A frame whose first packets arrived before anyone consumed frames has no bytes for them:
        // treat it as undecodable, as after a loss.
        if consumes, !hasAllBytes {
            frameBroken(context)
            releaseRange(first, last)
            return
        }
        if isKey {
            waitingForKeyframe = false
            context.keyframeDelivered()
            counters.keyframesReceived += 1
        }
        counters.framesDecodable += 1
        guard consumes else {
            releaseRange(first, last)
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
        context.deliver(
            EncodedFrame(codec: .vp8, data: data, timestamp: timestamp, isKeyframe: isKey), arrival: arrival)
    }
}

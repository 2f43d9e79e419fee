import RTCWire
import Testing

@testable import RTC

/// The stream around a frame assembler, recorded: holes are given up only when the test says so.
private final class RecordingAssemblyContext: RTPFrameAssemblyContext {
    var givenUp: Set<Int64> = []
    var forgottenBefore: Int64 = 0
    var keyframeNeeds = 0
    var keyframesDelivered = 0
    var consumesFrames = true
    var frames: [EncodedFrame] = []
    var arrivals: [UInt64] = []

    func isGivenUp(_ ext: Int64) -> Bool { givenUp.contains(ext) }
    func giveUp(_ ext: Int64) { givenUp.insert(ext) }
    func forgetHoles(before ext: Int64) { forgottenBefore = max(forgottenBefore, ext) }
    func needKeyframe() { keyframeNeeds += 1 }
    func keyframeDelivered() { keyframesDelivered += 1 }
    func deliver(_ frame: EncodedFrame, arrival: UInt64) {
        frames.append(frame)
        arrivals.append(arrival)
    }
}

/// One synthetic VP8 packet: a descriptor with a 15-bit picture ID, then media bytes.
private struct SyntheticVP8Packet {
    var ext: Int64
    var timestamp: UInt32
    var marker: Bool
    var bytes: [UInt8]

    /// Packet `part` of `parts` of the frame with picture ID `pictureID`; a key frame's first packet
    /// carries the key-frame header.
    init(ext: Int64, timestamp: UInt32, pictureID: UInt16, part: Int, of parts: Int, key: Bool) {
        self.ext = ext
        self.timestamp = timestamp
        marker = part == parts - 1
        let start = part == 0
        var b: [UInt8] = [start ? 0x90 : 0x80, 0x80, 0x80 | UInt8(pictureID >> 8 & 0x7F), UInt8(pictureID & 0xFF)]
        if start {
            b += key ? [0x10, 0x02, 0x00, 0x9D, 0x01, 0x2A, 0x40, 0x01, 0xF0, 0x00] : [0x11, 0x01, 0x00]
        }
        b += (0..<20).map { UInt8(truncatingIfNeeded: Int(pictureID) &* 13 &+ part &* 7 &+ $0) }
        bytes = b
    }
}

/// The packets of consecutive frames: `keys` says which frames are key frames.
private func frames(
    count: Int, packetsPerFrame: Int = 3, firstExt: Int64 = 0x1_0000, firstTimestamp: UInt32 = 1000,
    firstPictureID: UInt16 = 100, keys: Set<Int> = [0]
) -> [[SyntheticVP8Packet]] {
    (0..<count).map { f in
        (0..<packetsPerFrame).map { p in
            SyntheticVP8Packet(
                ext: firstExt + Int64(f * packetsPerFrame + p), timestamp: firstTimestamp &+ UInt32(f) &* 3000,
                pictureID: (firstPictureID &+ UInt16(f)) & 0x7FFF, part: p, of: packetsPerFrame, key: keys.contains(f))
        }
    }
}

private func insert(
    _ packet: SyntheticVP8Packet, into assembler: VideoFrameAssembler, now: UInt64, context: RecordingAssemblyContext
) {
    packet.bytes.withUnsafeBytes { payload in
        let info = try! VP8PayloadFormat.inspect(payload)
        if assembler.isLate(packet.ext, now: now) { return }
        assembler.insert(
            RTPAssemblyPacket(
                ext: packet.ext, timestamp: packet.timestamp, marker: packet.marker, payload: payload, info: info),
            now: now, context: context)
    }
}

/// The media bytes (descriptor removed) of a frame's packets, concatenated.
private func media(_ packets: [SyntheticVP8Packet]) -> [UInt8] {
    packets.flatMap { Array($0.bytes[4...]) }
}

@Suite struct RTPFrameAssemblerTests {
    private let ms: UInt64 = 1_000_000

    @Test func reorderedPacketsComeOutAsWholeFramesInOrder() {
        let assembler = VideoFrameAssembler(capacity: 64, reorderWait: 50 * ms)
        let context = RecordingAssemblyContext()
        let sent = frames(count: 4)
        // Frame by frame, last packet first; frame 2 arrives before frame 1 entirely.
        let order = [0, 2, 1, 3].flatMap { sent[$0].reversed() }
        var now: UInt64 = 1_000 * ms
        for p in order {
            insert(p, into: assembler, now: now, context: context)
            now += ms
        }
        #expect(context.frames.map(\.timestamp) == [1000, 4000, 7000, 10000])
        #expect(context.frames.map(\.data) == sent.map(media))
        #expect(context.frames.map(\.isKeyframe) == [true, false, false, false])
        #expect(assembler.counters.framesDecodable == 4)
        #expect(assembler.counters.framesDropped == 0)
        #expect(context.keyframeNeeds == 0)
        #expect(context.keyframesDelivered == 1)
    }

    @Test func aHoleIsWaitedForUntilGivenUpThenTheFrameIsDroppedAndAKeyFrameAsked() {
        let assembler = VideoFrameAssembler(capacity: 64, reorderWait: 50 * ms)
        let context = RecordingAssemblyContext()
        let sent = frames(count: 5, keys: [0, 4])
        let lost = sent[1][1].ext
        let now: UInt64 = 1_000 * ms
        for frame in sent[0...3] {
            for p in frame where p.ext != lost { insert(p, into: assembler, now: now, context: context) }
        }
        // Waiting for the hole: nothing after frame 0 comes out, nothing is asked yet.
        #expect(context.frames.count == 1)
        #expect(context.keyframeNeeds == 0)

        context.givenUp.insert(lost)
        assembler.advance(now: now + 100 * ms, context: context)
        // Frame 1 is broken; frames 2 and 3 are deltas that depend on it: dropped, key frame asked.
        #expect(context.frames.count == 1)
        #expect(assembler.counters.framesDropped == 3)
        #expect(context.keyframeNeeds >= 1)

        for p in sent[4] { insert(p, into: assembler, now: now + 120 * ms, context: context) }
        #expect(context.frames.map(\.timestamp) == [1000, 13000])
        #expect(context.frames.last?.isKeyframe == true)
        #expect(context.keyframesDelivered == 2)
    }

    @Test func aHoleFilledLateCompletesTheFrame() {
        let assembler = VideoFrameAssembler(capacity: 64, reorderWait: 50 * ms)
        let context = RecordingAssemblyContext()
        let sent = frames(count: 3)
        let late = sent[1][0]
        for frame in sent {
            for p in frame where p.ext != late.ext { insert(p, into: assembler, now: 0, context: context) }
        }
        #expect(context.frames.count == 1)
        insert(late, into: assembler, now: 10 * ms, context: context)
        #expect(context.frames.map(\.data) == sent.map(media))
        #expect(context.arrivals[1] == 10 * ms, "a frame's arrival is its last packet's")
        #expect(assembler.counters.framesDropped == 0)
        // A packet of a released frame is late.
        #expect(assembler.isLate(sent[0][1].ext, now: 20 * ms))
    }

    @Test func sequenceAndTimestampWrapAroundAreSeamless() {
        let assembler = VideoFrameAssembler(capacity: 64, reorderWait: 50 * ms)
        let context = RecordingAssemblyContext()
        // Extended numbers cross 2^17 (sequence number 0xFFFF -> 0), timestamps cross 2^32, picture
        // IDs cross 0x7FFF.
        let sent = frames(
            count: 6, firstExt: 0x2_0000 - 7, firstTimestamp: UInt32.max - 5000, firstPictureID: 0x7FFE)
        for frame in sent { for p in frame.reversed() { insert(p, into: assembler, now: 0, context: context) } }
        #expect(context.frames.map(\.data) == sent.map(media))
        #expect(context.frames.map(\.timestamp) == sent.map { $0[0].timestamp })
        #expect(assembler.counters.framesDropped == 0)
    }

    /// The marker search resumes where it stopped (a hole or the newest packet): whatever the
    /// arrival order inside a window, every long frame comes out whole and in order.
    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func longFramesInAnyOrderComeOutWhole(seed: UInt64) {
        let assembler = VideoFrameAssembler(capacity: 64, reorderWait: 50 * ms)
        let context = RecordingAssemblyContext()
        let sent = frames(count: 8, packetsPerFrame: 10, keys: [0])
        var packets = sent.flatMap { $0 }
        // Shuffle inside windows of 16 packets (frames overlap), deterministically per seed.
        var state = seed
        for base in stride(from: 0, to: packets.count, by: 16) {
            let end = min(base + 16, packets.count)
            for i in stride(from: end - 1, to: base, by: -1) {
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                packets.swapAt(i, base + Int((state >> 33) % UInt64(i - base + 1)))
            }
        }
        for p in packets { insert(p, into: assembler, now: 0, context: context) }
        #expect(context.frames.map(\.data) == sent.map(media))
        #expect(assembler.counters.framesDropped == 0)
    }

    @Test func aFrameWithoutItsMarkerIsCutAtTheNextFrameStart() {
        let assembler = VideoFrameAssembler(capacity: 64, reorderWait: 50 * ms)
        let context = RecordingAssemblyContext()
        var sent = frames(count: 4, keys: [0, 3])
        // Frame 1's last packet loses its marker: the frame ends where frame 2 starts, incomplete.
        sent[1][2].marker = false
        // Frame 2's last packet carries another timestamp: the frame ends before it, incomplete.
        sent[2][2].timestamp &+= 1
        for frame in sent { for p in frame { insert(p, into: assembler, now: 0, context: context) } }
        #expect(context.frames.map(\.timestamp) == [1000, 10000])
        #expect(assembler.counters.framesDropped >= 2)
        #expect(context.keyframeNeeds >= 1)
    }

    @Test func aDeltaFrameHeadWaitsForAnEarlierStartThenCountsAsBroken() {
        let assembler = VideoFrameAssembler(capacity: 64, reorderWait: 50 * ms)
        let context = RecordingAssemblyContext()
        let sent = frames(count: 3, keys: [])
        for frame in sent[1...] { for p in frame { insert(p, into: assembler, now: 0, context: context) } }
        #expect(!assembler.synced, "a delta frame first: an earlier start may still come")
        // The reordered head arrives inside the wait: the stream starts there.
        for p in sent[0] { insert(p, into: assembler, now: 10 * ms, context: context) }
        assembler.advance(now: 60 * ms, context: context)
        #expect(assembler.synced)
        // Nothing is decodable without a key frame.
        #expect(context.frames.isEmpty)
        #expect(assembler.counters.framesDropped == 3)
        #expect(context.keyframeNeeds >= 1)
    }

    @Test func aJumpPastTheWindowRestartsAtTheNewPacket() {
        let assembler = VideoFrameAssembler(capacity: 16, reorderWait: 50 * ms)
        let context = RecordingAssemblyContext()
        let before = frames(count: 1)
        for p in before[0] { insert(p, into: assembler, now: 0, context: context) }
        let after = frames(count: 1, firstExt: 0x1_0000 + 1000, firstTimestamp: 900_000, firstPictureID: 500)
        #expect(assembler.jumpsPastWindow(after[0][0].ext))
        for p in after[0] { insert(p, into: assembler, now: ms, context: context) }
        #expect(context.frames.map(\.timestamp) == [1000, 900_000])
    }

    @Test func withoutAConsumerNoFrameIsBuiltButFramesAreCounted() {
        let assembler = VideoFrameAssembler(capacity: 64, reorderWait: 50 * ms)
        let context = RecordingAssemblyContext()
        context.consumesFrames = false
        for frame in frames(count: 3) { for p in frame { insert(p, into: assembler, now: 0, context: context) } }
        #expect(context.frames.isEmpty)
        #expect(assembler.counters.framesDecodable == 3)
        // A consumer that appears mid-stream gets frames from the next complete one.
        context.consumesFrames = true
        let more = frames(count: 2, firstExt: 0x1_0000 + 9, firstTimestamp: 10000, firstPictureID: 103, keys: [])
        for frame in more { for p in frame { insert(p, into: assembler, now: 0, context: context) } }
        #expect(context.frames.map(\.data) == more.map(media))
    }

    @Test func opusDeliversEachPacketAndDropsLateOnes() {
        let assembler = OpusFrameAssembler()
        let context = RecordingAssemblyContext()
        let payload: [UInt8] = [0x78, 1, 2, 3]  // CELT 20 ms, one frame
        func insert(_ ext: Int64) {
            payload.withUnsafeBytes { p in
                assembler.insert(
                    RTPAssemblyPacket(ext: ext, timestamp: UInt32(ext) * 960, marker: false, payload: p, info: .init()),
                    now: 0, context: context)
            }
        }
        insert(10)
        insert(12)  // 11 lost: skipped
        insert(11)  // late
        insert(13)
        #expect(context.frames.map(\.timestamp) == [9600, 11520, 12480])
        #expect(context.frames.allSatisfy { $0.data == payload && $0.duration == 960 })
        #expect(assembler.counters.packetsLate == 1)
        #expect(context.keyframeNeeds == 0)
    }
}

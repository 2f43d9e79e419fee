import RTCWire
import Testing

@testable import RTC
@testable import SFU

/// A consumer's sender reports carry its publisher's A/V relation (issue 37): the publisher's own
/// reports, moved into the outgoing timeline, at their instants on our clock; before the
/// publisher's first report, the last frame forwarded (as before).
@Suite("SFU sender reports from the publisher's")
struct SFUSenderReportTests {
    /// A down track that is a real ``RTPSender``: what it forwards is counted for its reports, and
    /// its reports are written as the subscriber's transport writes them.
    final class SenderDownTrack: SFUDownTrack {
        let sender: RTPSender
        init(codec: MediaCodec, ssrc: UInt32) {
            sender = RTPSender(ssrc: ssrc, payloadType: 96, codec: codec, historySize: 0, cname: "sfu", seed: 7)
        }
        var canSend: Bool { true }
        var canPad: Bool { false }
        var senderStats: RTPSenderStats? { sender.stats }
        var reportSource: (any RTPSenderReportSource)? {
            get { sender.reportSource }
            set { sender.reportSource = newValue }
        }
        func sendForwarded(
            payload: UnsafeRawBufferPointer, marker: Bool, timestamp: UInt32, sequenceNumber: UInt16,
            rewrite: RTPPayloadRewrite, audioLevel: RTPAudioLevel?, captureTime: UInt64?,
            dependencyDescriptor: UnsafeRawBufferPointer?, now: UInt64
        ) -> Bool {
            sender.sendForwarded(
                payload: payload, marker: marker, timestamp: timestamp, sequenceNumber: sequenceNumber,
                rewrite: rewrite, now: now
            ) { _, _ in }
        }
        func sendRetransmission(
            payload: UnsafeRawBufferPointer, marker: Bool, timestamp: UInt32, sequenceNumber: UInt16,
            rewrite: RTPPayloadRewrite, dependencyDescriptor: UnsafeRawBufferPointer?, now: UInt64
        ) -> Bool { false }
        func sendPadding(bytes: Int, now: UInt64) -> Int { 0 }

        /// The sender report written at loop time `now` with our wall clock `wall`.
        func report(now: UInt64, wall: NTPTime) throws -> RTCPSenderReport {
            var bytes = [UInt8](repeating: 0, count: 256)
            let end = bytes.withUnsafeMutableBytes {
                sender.makeSenderReport(now: now, wallClock: wall, into: $0, at: 0)
            }
            let packets = try RTCPCompound.parse(Array(bytes[0..<end]))
            guard case .senderReport(let sr) = packets.first else { throw RTCPError.badFCI }
            return sr
        }
    }

    static let start: UInt64 = 5_000_000_000
    static let ms: UInt64 = 1_000_000
    /// The publisher's wall clock at loop time `t` (its own clock: an arbitrary offset from ours).
    static func publisherClock(_ t: UInt64) -> NTPTime {
        NTPTime(seconds: 3_900_000_000, fraction: 0).adding(nanoseconds: Int64(t) - Int64(start))
    }
    /// Our wall clock at loop time `t` (another offset again).
    static func ourClock(_ t: UInt64) -> NTPTime {
        NTPTime(seconds: 3_950_000_000, fraction: 0x4000_0000).adding(nanoseconds: Int64(t))
    }
    static let transit = 20 * ms
    /// The publisher's audio leaves 150 ms after the video captured with it (its capture pipeline):
    /// its reports still map both to the capture instant.
    static let audioLate = 150 * ms
    static let video = SyntheticVP8Layer(
        index: 0, ssrc: 0x100, width: 640, height: 360, firstSequenceNumber: 100, firstTimestamp: 2_000_000_000,
        firstPictureID: 1, firstTL0PicIdx: 1)
    static let audioSSRC: UInt32 = 0x500
    static let audioFirstTimestamp: UInt32 = 70_000

    /// A report stamped `sent` on the publisher's clock, arriving `delay` later, as the receiver maps it.
    static func report(
        _ mapping: inout SenderClockMapping, sent: UInt64, rtp: UInt32, delay: UInt64
    ) -> SFULayerTimeline.SenderReport {
        mapping.add(ntp: publisherClock(sent), arrival: sent + delay)
        return (publisherClock(sent), rtp, mapping.localTime(of: publisherClock(sent))!)
    }

    /// The wall-clock instant a consumer's report gives its outgoing timestamp `timestamp`.
    static func instant(of timestamp: UInt32, _ report: RTCPSenderReport, clockRate: Int64) -> Int64 {
        let ticks = Int64(Int32(bitPattern: timestamp &- report.rtpTimestamp))
        return NTPTime(value: report.ntpTimestamp).nanosecondsSince1900 + ticks * 1_000_000_000 / clockRate
    }

    @Test func theConsumersReportsKeepThePublishersAudioVideoOffset() async throws {
        let sfu = SFU()
        let videoRig = SFUUnitRig(rids: [], sfu: sfu)
        let audioRig = SFUUnitRig(audioLevelID: 3, sfu: sfu)
        let videoTrack = SenderDownTrack(codec: .vp8, ssrc: 0xA1)
        let audioTrack = SenderDownTrack(codec: .opus, ssrc: 0xA2)
        let videoConsumer = SFUConsumer(
            id: "c-v", subscriberID: "bob", producer: videoRig.producer, track: videoTrack)
        let audioConsumer = SFUConsumer(
            id: "c-a", subscriberID: "bob", producer: audioRig.producer, track: audioTrack)
        videoRig.producer.consumers.append(videoConsumer)
        audioRig.producer.consumers.append(audioConsumer)
        #expect(videoTrack.reportSource === videoConsumer && audioTrack.reportSource === audioConsumer)

        // Two seconds of media: video frame 3i and audio frame 5i captured at the same instant; the
        // video arrives `transit` after capture, the audio 150 ms later still.
        func feed(from: Int, to: Int) throws {
            for k in from..<to {
                let captured = Self.start + UInt64(k) * 33_333_333
                try videoRig.producer.receive(
                    Self.video.packet(k, keyframe: k == 0), rid: nil, arrival: captured + Self.transit)
            }
            for j in (from * 5 / 3)..<(to * 5 / 3) {
                let captured = Self.start + UInt64(j) * 20 * Self.ms
                try audioRig.producer.receive(
                    syntheticOpusPacket(
                        ssrc: Self.audioSSRC, sequenceNumber: UInt16(j), timestamp: Self.audioTimestamp(j),
                        extensionID: 3, level: 30, voice: true), rid: nil,
                    arrival: captured + Self.transit + Self.audioLate)
            }
        }
        try feed(from: 0, to: 30)
        // Before the publisher's first report: extrapolated from the last frame forwarded, the audio
        // shows up 150 ms late (the behaviour kept until a report comes).
        let now = Self.start + 1_200 * Self.ms
        let skewBefore = try Self.skew(videoTrack, audioTrack, now: now)
        #expect(abs(skewBefore - 150) < 10, "audio \(skewBefore) ms after the video without the publisher's reports")

        // The publisher's reports: each maps its RTP clock to its capture clock, sent when due and
        // arriving after the transit; one audio report is held 6 ms longer on the way.
        var videoClock = SenderClockMapping()
        var audioClock = SenderClockMapping()
        videoRig.upstream.reports[Self.video.ssrc] = Self.report(
            &videoClock, sent: Self.start + 500 * Self.ms, rtp: Self.video.firstTimestamp &+ 45_000,
            delay: Self.transit)
        audioRig.upstream.reports[Self.audioSSRC] = Self.report(
            &audioClock, sent: Self.start + 300 * Self.ms, rtp: Self.audioFirstTimestamp &+ 14_400,
            delay: Self.transit)
        audioRig.upstream.reports[Self.audioSSRC] = Self.report(
            &audioClock, sent: Self.start + 900 * Self.ms, rtp: Self.audioFirstTimestamp &+ 43_200,
            delay: Self.transit + 6 * Self.ms)
        try feed(from: 30, to: 60)
        for seconds in [2.1, 2.6] {
            let skew = try Self.skew(videoTrack, audioTrack, now: Self.start + UInt64(seconds * 1e9))
            #expect(abs(skew) < 2, "audio \(skew) ms from the video at \(seconds) s through the publisher's reports")
        }

        // A consumer that is gone falls back to its last frame.
        audioConsumer.closed = true
        #expect(audioConsumer.senderReportReference() == nil)
        for c in [videoConsumer, audioConsumer] { c.closed = true }
        videoRig.producer.consumers = []
        audioRig.producer.consumers = []
        await sfu.shutdown()
    }

    static func audioTimestamp(_ j: Int) -> UInt32 { audioFirstTimestamp &+ UInt32(j) * 960 }

    /// How much later (ms) the consumers' reports place an audio frame than the video frame captured
    /// with it (video frame 30 and audio frame 50: one second after the start).
    static func skew(_ videoTrack: SenderDownTrack, _ audioTrack: SenderDownTrack, now: UInt64) throws -> Double {
        let videoReport = try videoTrack.report(now: now, wall: ourClock(now))
        let audioReport = try audioTrack.report(now: now, wall: ourClock(now))
        // The first packets forwarded keep their timestamps (no switch yet): the outgoing timestamps
        // are the publisher's.
        let videoAt = instant(of: video.timestamp(30), videoReport, clockRate: 90_000)
        let audioAt = instant(of: audioTimestamp(50), audioReport, clockRate: 48_000)
        return Double(audioAt - videoAt) / 1e6
    }

    @Test func aLayerSwitchKeepsTheReportedTimeline() async throws {
        // Two simulcast layers captured together with unrelated RTP origins; their reports map both.
        let rig = SFUUnitRig(rids: ["q", "f"])
        let low = SFUForwardingCoreTests.low
        let high = SyntheticVP8Layer(
            index: 1, ssrc: 0x300, width: 1280, height: 720, firstSequenceNumber: 65528,
            firstTimestamp: 4_000_000_000, firstPictureID: 32760, firstTL0PicIdx: 250)
        let track = RecordingDownTrack()
        let consumer = SFUConsumer(id: "c-1", subscriberID: "bob", producer: rig.producer, track: track)
        consumer.quality = .low
        consumer.updateTarget()
        rig.producer.consumers.append(consumer)
        #expect(track.reportSource === consumer)
        func time(_ k: Int) -> UInt64 { Self.start + UInt64(k) * 33_333_333 + Self.transit }
        var lowClock = SenderClockMapping()
        var highClock = SenderClockMapping()
        rig.upstream.reports[low.ssrc] = Self.report(
            &lowClock, sent: Self.start, rtp: low.firstTimestamp, delay: Self.transit)
        rig.upstream.reports[high.ssrc] = Self.report(
            &highClock, sent: Self.start, rtp: high.firstTimestamp, delay: Self.transit)
        #expect(consumer.senderReportReference() == nil, "nothing forwarded yet")
        for k in 0..<10 {
            try rig.producer.receive(low.packet(k, keyframe: k == 0), rid: "q", arrival: time(k))
            try rig.producer.receive(high.packet(k, keyframe: false), rid: "f", arrival: time(k))
        }
        let before = try #require(consumer.senderReportReference())
        // The high layer's key frame comes 100 ms late; the switch lines it up by the reports.
        consumer.quality = .high
        consumer.retarget(now: time(10))
        try rig.producer.receive(low.packet(10, keyframe: false), rid: "q", arrival: time(10))
        try rig.producer.receive(high.packet(11, keyframe: true), rid: "f", arrival: time(11) + 100 * Self.ms)
        #expect(consumer.currentLayer == 1 && consumer.layerSwitches == 1)
        let after = try #require(consumer.senderReportReference())
        // Both references give the same RTP time for one instant, and the last packet sent sits on it
        // (captured 11 frames after the start: on our clock, a transit later).
        let at = Self.start + 2_000 * Self.ms
        func rtp(_ reference: (rtpTimestamp: UInt32, localTime: UInt64)) -> UInt32 {
            reference.rtpTimestamp &+ UInt32(truncatingIfNeeded: (Int64(at) - Int64(reference.localTime)) * 9 / 100_000)
        }
        #expect(abs(Int32(bitPattern: rtp(after) &- rtp(before))) <= 1)
        let capturedEleven = rtp(after) &- UInt32((at - Self.start - 11 * 33_333_333 - Self.transit) * 9 / 100_000)
        #expect(abs(Int32(bitPattern: track.sent.last!.timestamp &- capturedEleven)) <= 1)
        await rig.close()
    }
}

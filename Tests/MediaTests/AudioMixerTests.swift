import Foundation
import Media
import Testing

/// The audio mix (`--mix-audio`): headroom without clipping, sources placed by their timeline
/// position, silence where nobody spoke; the per-speaker PCM header; the speaker timeline's hysteresis.
@Suite struct AudioMixerTests {
    /// `count` samples of a sine at `hz` with peak `amplitude`, starting at sample `from`.
    static func tone(_ hz: Double, amplitude: Double, count: Int, from: Int = 0) -> [Int16] {
        (0..<count).map { Int16((amplitude * sin(2 * .pi * hz * Double(from + $0) / 48_000)).rounded()) }
    }

    /// The magnitude of `hz` in `samples` (Goertzel), as a fraction of full scale.
    static func magnitude(_ samples: [Int16], _ hz: Double) -> Double {
        let w = 2 * Double.pi * hz / 48_000
        var (s1, s2) = (0.0, 0.0)
        for x in samples {
            let s0 = Double(x) / 32768 + 2 * cos(w) * s1 - s2
            (s2, s1) = (s1, s0)
        }
        let power = s1 * s1 + s2 * s2 - 2 * cos(w) * s1 * s2
        return power.squareRoot() * 2 / Double(samples.count)
    }

    static func mix(_ mixer: inout AudioMixer, blocks: Int) -> [Int16] {
        var out: [Int16] = []
        var block = [Int16]()
        for _ in 0..<blocks {
            mixer.mixBlock(into: &block)
            out += block
        }
        return out
    }

    @Test func twoFullScaleTonesNeverClipAndBothStayAudible() {
        var mixer = AudioMixer()
        let n = 48_000
        mixer.write(source: "a", at: 0, Self.tone(440, amplitude: 32767, count: n))
        mixer.write(source: "b", at: 0, Self.tone(1000, amplitude: 32767, count: n))
        let out = Self.mix(&mixer, blocks: n / AudioMixer.blockSamples)
        #expect(out.count == n)
        let peak = out.map { abs(Int($0)) }.max() ?? 0
        // The sum reaches twice full scale; the curve keeps it below the rails (no flat tops, no wrap).
        #expect(peak < 32767 && peak > 30_000, "peak \(peak)")
        let railed = out.filter { $0 == .max || $0 == .min }.count
        #expect(railed == 0)
        let (a, b) = (Self.magnitude(out, 440), Self.magnitude(out, 1000))
        #expect(a > 0.4 && b > 0.4, "440 Hz \(a), 1000 Hz \(b)")
        // A tone that is in neither source stays far below both.
        #expect(Self.magnitude(out, 700) < 0.05)
    }

    @Test func oneSpeakerBelowTheKneeIsBitExact() {
        var mixer = AudioMixer()
        let input = Self.tone(300, amplitude: 8000, count: 4800)
        mixer.write(source: "a", at: 0, input)
        #expect(Self.mix(&mixer, blocks: 5) == input)
    }

    @Test func curveIsMonotonicAndBelowFullScale() {
        var previous = Int16.min
        for sum in stride(from: Int32(-8 * 32768), through: 8 * 32768, by: 97) {
            let y = AudioMixer.shape(sum)
            #expect(y >= previous)
            previous = y
            #expect(y <= AudioMixer.ceilingSample && y >= -AudioMixer.ceilingSample)
        }
    }

    @Test func sourcesLandAtTheirTimelinePositionsWhateverTheWriteOrder() {
        var mixer = AudioMixer()
        let click = [Int16](repeating: 10_000, count: 10)
        // Written out of order and in pieces; b's block arrives before a's earlier one.
        mixer.write(source: "b", at: 3_000, click)
        mixer.write(source: "a", at: 1_234, click)
        mixer.write(source: "a", at: 5_000, Array(click.prefix(4)))
        mixer.write(source: "a", at: 5_004, Array(click.suffix(6)))
        let out = Self.mix(&mixer, blocks: 7)
        let loud = out.indices.filter { out[$0] != 0 }
        #expect(loud == Array(1_234..<1_244) + Array(3_000..<3_010) + Array(5_000..<5_010))
        // Overlapping sources add (below the knee, exactly).
        var both = AudioMixer()
        let soft = [Int16](repeating: 6_000, count: 10)
        both.write(source: "a", at: 100, soft)
        both.write(source: "b", at: 105, soft)
        let sum = Self.mix(&both, blocks: 1)
        #expect(sum[104] == 6_000 && sum[105] == 12_000 && sum[114] == 6_000 && sum[115] == 0)
    }

    @Test func silenceIsWrittenWhereNobodySpeaksAndLateSamplesAreDropped() {
        var mixer = AudioMixer()
        // Nobody yet: the mix still advances, in silence.
        let silent = Self.mix(&mixer, blocks: 50)
        #expect(silent.count == 50 * AudioMixer.blockSamples && silent.allSatisfy { $0 == 0 })
        #expect(mixer.position == 48_000)
        // A frame for a time already mixed is dropped (counted), the part still ahead kept.
        let kept = mixer.write(source: "a", at: 48_000 - 100, [Int16](repeating: 500, count: 960))
        #expect(kept == 860 && mixer.lateSamples == 100)
        let next = Self.mix(&mixer, blocks: 2)
        #expect(next.prefix(860).allSatisfy { $0 == 500 } && next.dropFirst(860).allSatisfy { $0 == 0 })
        // A source that left contributes nothing more.
        mixer.write(source: "a", at: mixer.position, [Int16](repeating: 500, count: 960))
        mixer.remove(source: "a")
        #expect(Self.mix(&mixer, blocks: 1).allSatisfy { $0 == 0 })
        // A write far ahead of the mix is refused rather than buffered.
        #expect(mixer.write(source: "a", at: mixer.position + AudioMixer.maxLeadSamples, [1, 2, 3]) == 0)
        #expect(mixer.earlySamples == 3)
    }

    @Test func pcmHeaderRoundTripsAndBadFramesAreRefused() throws {
        let frame = SpeakerPCMFrame(
            participantId: "alice-ü", timestampMs: 123_456_789_012, sampleRate: 16_000, samples: [0, 1, -1, .max, .min])
        let bytes = frame.encoded()
        #expect(Array(bytes.prefix(4)) == Array("UPCM".utf8) && bytes[4] == 1)
        #expect(Int(bytes[5]) == "alice-ü".utf8.count)
        #expect(bytes.count == 22 + Int(bytes[5]) + 10)
        #expect(try SpeakerPCMFrame(decoding: bytes) == frame)
        #expect(throws: SpeakerPCMFrame.DecodeError.badMagic) {
            try SpeakerPCMFrame(decoding: [0x00] + bytes.dropFirst())
        }
        #expect(throws: SpeakerPCMFrame.DecodeError.tooShort) { try SpeakerPCMFrame(decoding: Array(bytes.prefix(12))) }
        #expect(throws: SpeakerPCMFrame.DecodeError.lengthMismatch(expected: bytes.count, got: bytes.count - 1)) {
            try SpeakerPCMFrame(decoding: Array(bytes.dropLast()))
        }
        var v2 = bytes
        v2[4] = 2
        #expect(throws: SpeakerPCMFrame.DecodeError.unsupportedVersion(2)) { try SpeakerPCMFrame(decoding: v2) }
        // An id longer than 255 bytes is cut at a character boundary, and the frame still reads.
        let long = SpeakerPCMFrame(
            participantId: String(repeating: "é", count: 200), timestampMs: 0, sampleRate: 48_000, samples: [])
        let cut = try SpeakerPCMFrame(decoding: long.encoded())
        #expect(cut.participantId == String(repeating: "é", count: 127))
    }

    @Test func speakerTurnsFollowLevelsWithHangover() {
        var activity = SpeakerActivity()
        var changes: [SpeakerActivity.Change] = []
        func frame(_ i: Int, _ level: Float) {
            if let c = activity.frame(at: Int64(i * 960), samples: 960, level: level) { changes.append(c) }
        }
        for i in 0..<10 { frame(i, -80) }
        for i in 10..<60 { frame(i, -20) }
        // A 200 ms pause does not end the turn; 400 ms of quiet does.
        for i in 60..<70 { frame(i, -70) }
        for i in 70..<80 { frame(i, -20) }
        for i in 80..<120 { frame(i, -70) }
        let expected: [SpeakerActivity.Change] = [.started(at: 9_600), .stopped(start: 9_600, end: 76_800)]
        #expect(changes == expected)
        // No frames at all (a mute): time passing ends the turn too.
        frame(200, -10)
        let early = activity.idle(until: 201 * 960 + 100)
        #expect(early == nil)
        let end: Int64 = 201 * 960
        let stopped = activity.idle(until: end + SpeakerActivity.hangover)
        let turn: SpeakerActivity.Change = .stopped(start: 192_000, end: end)
        #expect(stopped == turn)
    }

    @Test func opusDecodesAt16kHzDirectly() throws {
        let encoder = try OpusEncoder(channels: 1)
        let decoder = try OpusDecoder(channels: 1, sampleRate: 16_000)
        var out: [Int16] = []
        for i in 0..<50 {
            let packet = try encoder.encode(pcm: Self.tone(1000, amplitude: 16_000, count: 960, from: i * 960))
            let pcm = try decoder.decode(packet)
            #expect(pcm.count == 320)
            out += pcm
        }
        #expect(try decoder.decode(nil, lostSamples: 320).count == 320)
        // 1 kHz at 16 kHz is 1 kHz at 48 kHz with a third of the samples: measure with the 16 kHz rate.
        let w = 1000.0 * 3
        #expect(Self.magnitude(Array(out.suffix(8000)), w) > 0.3)
        #expect(throws: MediaError.self) { try OpusDecoder(sampleRate: 44_100) }
    }
}

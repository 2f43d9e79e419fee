import Foundation
import Media
import RTC
import RTCWire
import Testing

@testable import Agent

/// Lip sync by sender reports (issue 37, "A/V offset within ±40 ms"): a sender whose audio leaves
/// 150 ms after the video captured with it, its sender reports saying so, still has its beep in the
/// mix where its picture arrives (where the composite shows it), not where its audio arrived.
@Suite struct SenderClocksTests {
    static let ms: UInt64 = 1_000_000
    /// The sender's wall clock, far from ours (any origin will do).
    static func senderTime(_ local: UInt64) -> NTPTime { NTPTime(unixNanoseconds: local &+ 1_700_000_000_000_000_000) }

    @Test func theWebcamsFastestFrameSetsTheMappingAndANewClockResetsIt() throws {
        let clocks = SenderClocks()
        #expect(clocks.audioTime("a", senderTime: Self.senderTime(0)) == nil)
        let base: UInt64 = 50_000 * Self.ms
        // Frames 10, 14 and 12 ms after capture: the mapping is the fastest, 10 ms.
        for (i, delay) in [14, 10, 12].enumerated() {
            let captured = base + UInt64(i) * 33 * Self.ms
            clocks.video("a", senderTime: Self.senderTime(captured), arrival: captured + UInt64(delay) * Self.ms)
        }
        let audio = base + 500 * Self.ms
        // (NTP's 2^-32 s steps round by a nanosecond or so.)
        let mapped = try #require(clocks.audioTime("a", senderTime: Self.senderTime(audio)))
        #expect(abs(Int64(bitPattern: mapped &- (audio + 10 * Self.ms))) <= 1_000)
        #expect(clocks.audioTime("a", senderTime: nil) == nil)
        #expect(clocks.audioTime("b", senderTime: Self.senderTime(audio)) == nil)
        // The sender's clock jumps back 5 s (a restart): the mapping starts again.
        let later = base + 2_000 * Self.ms
        clocks.video("a", senderTime: Self.senderTime(later - 5_000 * Self.ms), arrival: later + 20 * Self.ms)
        let reset = try #require(clocks.audioTime("a", senderTime: Self.senderTime(later - 5_000 * Self.ms)))
        #expect(abs(Int64(bitPattern: reset &- (later + 20 * Self.ms))) <= 1_000)
        clocks.forget("a")
        #expect(clocks.audioTime("a", senderTime: Self.senderTime(later)) == nil)
    }

    @Test func aSenderWhoseAudioLagsItsVideoStaysInSyncInTheMix() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sync-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/mix.ogg"
        let recorder = ParticipantRecorder(
            directory: nil, format: .webm, writesManifest: false,
            manifest: RecordingManifest(room: "r", recordFormat: "webm"), log: { _ in })
        let egress = try AudioEgress(options: AudioEgress.Options(mixPath: path), recorder: recorder, log: { _ in })
        let clocks = SenderClocks()
        let ms = Self.ms
        let start = egress.origin + 100 * ms
        // "a": webcam frames arrive 10 ms after capture; mic frames 150 ms after (a slow audio path),
        // with timestamps from an arbitrary origin, and sender reports only from the 10th frame on.
        for i in 0..<30 {
            let captured = start + UInt64(i) * 33 * ms
            clocks.video("a", senderTime: Self.senderTime(captured), arrival: captured + 10 * ms)
        }
        // "b": the same audio path, no webcam: its mic keeps its arrival timing.
        let a = egress.slot(participantId: "a", name: "A")
        let b = egress.slot(participantId: "b", name: "B")
        let encoderA = try OpusEncoder(channels: 1)
        let encoderB = try OpusEncoder(channels: 1)
        for i in 0..<50 {
            let captured = start + UInt64(i) * 20 * ms
            // A beep from the 25th frame (captured 500 ms after the start): 1 kHz for "a", 3 kHz for "b".
            let silent = [Int16](repeating: 0, count: 960)
            let packetA = try encoderA.encode(pcm: i >= 25 ? AudioEgressTests.tone(1000, frame: i) : silent)
            let packetB = try encoderB.encode(pcm: i >= 25 ? AudioEgressTests.tone(3000, frame: i) : silent)
            let arrival = captured + 150 * ms
            let synced = i >= 10 ? clocks.audioTime("a", senderTime: Self.senderTime(captured)) : nil
            a.write(
                EncodedFrame(codec: .opus, data: packetA, timestamp: 777_777 &+ UInt32(i * 960), isKeyframe: true),
                arrival: arrival, synced: synced ?? 0)
            b.write(
                EncodedFrame(codec: .opus, data: packetB, timestamp: UInt32(i * 960), isKeyframe: true),
                arrival: arrival)
        }
        a.end()
        b.end()
        while EventLoop.now() < egress.origin + 1_500 * ms { try await Task.sleep(nanoseconds: 20_000_000) }
        await egress.stop()

        let ogg = try OggOpusReader(path: path)
        let decoder = try OpusDecoder(channels: 1)
        var pcm: [Int16] = []
        for packet in ogg.packets { pcm += try decoder.decode(packet) }
        pcm.removeFirst(min(pcm.count, ogg.preSkip))
        // Each beep's onset by its own frequency: correlate 5 ms windows with each tone.
        func onset(_ hz: Double) -> Double? {
            let window = 240
            var at = 0
            while at + window <= pcm.count {
                var s = 0.0
                var c = 0.0
                for k in 0..<window {
                    let phase = 2 * Double.pi * hz * Double(at + k) / 48_000
                    s += Double(pcm[at + k]) * sin(phase)
                    c += Double(pcm[at + k]) * cos(phase)
                }
                if (s * s + c * c).squareRoot() / Double(window) > 1_500 { return Double(at) / 48 }
                at += window / 4
            }
            return nil
        }
        let lookahead = Double(encoderA.lookahead) / 48
        let beepA = try #require(onset(1000))
        let beepB = try #require(onset(3000))
        // The picture captured with the beep arrives (and is composed) 10 ms after it: 610 ms into the mix.
        let picture = 100.0 + 500 + 10
        #expect(abs(beepA - lookahead - picture) <= 10, "a's beep at \(beepA) ms, its picture at \(picture) ms")
        #expect(abs(beepA - lookahead - picture) <= 40)
        // Without a webcam the beep lands where it arrived: 140 ms later than a's.
        #expect(abs(beepB - lookahead - (100 + 500 + 150)) <= 10, "b's beep at \(beepB) ms")
    }
}

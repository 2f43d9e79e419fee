import Agent
import Foundation
import Media
import RTC
import RTCWire
import Testing

/// `--mix-audio` on its own queue, fed as the media loop feeds it: frames land on the room timeline
/// by their arrival and RTP timestamps (whatever the timestamps' origin), lost packets are concealed,
/// silence fills the rest, and the file lasts from the start to the stop.
@Suite struct AudioEgressTests {
    static func tone(_ hz: Double, frame: Int) -> [Int16] {
        (0..<960).map { Int16(12_000 * sin(2 * .pi * hz * Double(frame * 960 + $0) / 48_000)) }
    }

    /// Mean absolute sample of `pcm` in [from, to) (48 kHz indices).
    static func level(_ pcm: [Int16], _ from: Int, _ to: Int) -> Double {
        let slice = pcm[max(0, from)..<min(pcm.count, to)]
        return slice.isEmpty ? 0 : slice.reduce(0.0) { $0 + Double(abs(Int($1))) } / Double(slice.count)
    }

    @Test func framesLandOnTheTimelineAndSilenceFillsTheRest() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("egress-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/mix.ogg"
        let recorder = ParticipantRecorder(
            directory: nil, format: .webm, writesManifest: false,
            manifest: RecordingManifest(room: "r", recordFormat: "webm"), log: { _ in })
        let egress = try AudioEgress(options: AudioEgress.Options(mixPath: path), recorder: recorder, log: { _ in })
        let encoderA = try OpusEncoder(channels: 1)
        let encoderB = try OpusEncoder(channels: 1)
        let a = egress.slot(participantId: "a", name: "A")
        let b = egress.slot(participantId: "b", name: "B")
        let ms: UInt64 = 1_000_000
        // A: 500 ms from 200 ms on. B: 500 ms from 600 ms on, its timestamps near the wrap, packets
        // 10 and 11 lost (concealed), delivered late and in one burst (as after a stall).
        for i in 0..<25 {
            let packet = try encoderA.encode(pcm: Self.tone(500, frame: i))
            a.write(
                EncodedFrame(codec: .opus, data: packet, timestamp: UInt32(1000 + i * 960), isKeyframe: true),
                arrival: egress.origin + 200 * ms + UInt64(i) * 20 * ms)
        }
        for i in 0..<25 {
            let packet = try encoderB.encode(pcm: Self.tone(2000, frame: i))
            if i == 10 || i == 11 { continue }
            b.write(
                EncodedFrame(
                    codec: .opus, data: packet, timestamp: UInt32.max - 4800 &+ UInt32(i * 960), isKeyframe: true),
                arrival: egress.origin + 600 * ms + UInt64(i) * 20 * ms + (i >= 12 ? 60 * ms : 0))
        }
        a.end()
        b.end()
        // Let real time pass the last frame, then stop: the mix runs up to the stop.
        while EventLoop.now() < egress.origin + 1_500 * ms { try await Task.sleep(nanoseconds: 20_000_000) }
        await egress.stop()
        let elapsed = Double(EventLoop.now() - egress.origin) / 1e9

        let ogg = try OggOpusReader(path: path)
        let decoder = try OpusDecoder(channels: 1)
        var pcm: [Int16] = []
        for packet in ogg.packets { pcm += try decoder.decode(packet) }
        pcm.removeFirst(min(pcm.count, ogg.preSkip))
        let seconds = Double(pcm.count) / 48_000
        #expect(seconds >= 1.5 - 0.02 && seconds <= elapsed + 0.02, "mix \(seconds) s, ran \(elapsed) s")
        let manifest = recorder.manifest
        #expect(manifest.mixedAudio?.complete == true)
        #expect(abs((manifest.mixedAudio?.durationSeconds ?? 0) - seconds) < 0.03)
        // Silence before A, A alone, both, B alone (with the concealed gap), silence after.
        let ms48 = 48
        #expect(Self.level(pcm, 0, 190 * ms48) < 50)
        #expect(Self.level(pcm, 220 * ms48, 580 * ms48) > 3000)
        #expect(Self.level(pcm, 620 * ms48, 680 * ms48) > 5000)
        #expect(Self.level(pcm, 720 * ms48, 1080 * ms48) > 3000)
        // B's two lost packets (800-840 ms) are concealed, not silent.
        #expect(Self.level(pcm, 805 * ms48, 835 * ms48) > 1000)
        #expect(Self.level(pcm, 1_120 * ms48, pcm.count) < 50)
        // Onsets within 2 ms of where the frames were put, after the sender's encoder delay (its
        // lookahead, which an RTP stream carries uncompensated).
        let delay = encoderA.lookahead
        let onsetA = try #require(pcm.firstIndex { abs(Int($0)) > 2000 })
        #expect(abs(onsetA - 200 * ms48 - delay) < 2 * ms48, "A starts at \(Double(onsetA) / 48) ms")
        // B's end is where its timestamps put its last frame's end (the delay shifts the tone inside
        // the frames, not the frames), not 60 ms later where its late packets arrived.
        let endB = try #require(pcm[(1_000 * ms48)...].lastIndex { abs(Int($0)) > 2000 })
        #expect(abs(endB - 1_100 * ms48) < 2 * ms48, "B ends at \(Double(endB) / 48) ms")
        // The speaker timeline: A then B, where they spoke.
        let turns = try #require(manifest.speakers)
        #expect(turns.map(\.participantId).sorted() == ["a", "b"])
        for turn in turns {
            let (start, end) = turn.participantId == "a" ? (0.2, 0.7) : (0.6, 1.1)
            #expect(abs(turn.start - start) < 0.03 && abs(turn.end - end) < 0.03, "\(turn)")
        }
    }
}

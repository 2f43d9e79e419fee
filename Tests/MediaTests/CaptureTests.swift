import Foundation
import Media
import RTCWire
import TestSupport
import Testing

/// Root-mean-square of 16-bit samples.
private func rms(_ s: ArraySlice<Int16>) -> Double {
    guard !s.isEmpty else { return 0 }
    return (s.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(s.count)).squareRoot()
}

/// Power of `frequency` in `s` (Goertzel), normalised by length.
private func goertzel(_ s: ArraySlice<Int16>, frequency: Double, rate: Double = 48_000) -> Double {
    let k = 2 * cos(2 * Double.pi * frequency / rate)
    var a = 0.0
    var b = 0.0
    for x in s {
        let c = Double(x) + k * a - b
        b = a
        a = c
    }
    return (a * a + b * b - k * a * b) / Double(s.count * s.count)
}

/// Runs `samples` (mono, 48 kHz) through `processor` in 10 ms chunks.
private func processAll(_ samples: [Int16], _ processor: AudioProcessor) throws -> [Int16] {
    var out: [Int16] = []
    let n = processor.samplesPerChunk
    var at = 0
    while at + n <= samples.count {
        var chunk = Array(samples[at..<(at + n)])
        try processor.process(&chunk)
        out += chunk
        at += n
    }
    return out
}

private func tone(seconds: Double, frequency: Double, amplitude: Double) -> [Int16] {
    (0..<Int(48_000 * seconds)).map { Int16(amplitude * sin(2 * Double.pi * frequency * Double($0) / 48_000)) }
}

/// An ALSA configuration with a capture PCM `name` that reads raw S16_LE samples from `infile`
/// (the `file` plugin over a `null` slave): real ALSA, no sound card.
func fileCaptureConfig(name: String, infile: String) -> String {
    """
    pcm.\(name) {
        type file
        slave.pcm { type null }
        file "/dev/null"
        infile "\(infile)"
        format "raw"
    }
    """
}

@Suite(.serialized) struct CaptureTests {
    @Test func noiseSuppressionReducesWhiteNoise() throws {
        var seed: UInt32 = 12345
        let noise = (0..<(48_000 * 3)).map { _ -> Int16 in
            seed = seed &* 1_664_525 &+ 1_013_904_223
            return Int16(truncatingIfNeeded: Int32(seed >> 16) - 32768) / 8
        }
        let options = AudioProcessingOptions(
            echoCancellation: false, noiseSuppression: true, gainControl: false, highPassFilter: false)
        let out = try processAll(noise, AudioProcessor(options: options))
        let before = rms(noise[96_000..<144_000])
        let after = rms(out[96_000..<144_000])
        #expect(before > 1000)
        #expect(after < before * 0.5, "noise RMS \(before) → \(after)")
    }

    @Test func gainControlRaisesAQuietTone() throws {
        let quiet = tone(seconds: 6, frequency: 440, amplitude: 300)
        let options = AudioProcessingOptions(
            echoCancellation: false, noiseSuppression: false, gainControl: true, highPassFilter: false)
        let out = try processAll(quiet, AudioProcessor(options: options))
        let before = rms(quiet[240_000..<288_000])
        let after = rms(out[240_000..<288_000])
        #expect(after > before * 1.5, "tone RMS \(before) → \(after)")
        // Still the same tone, louder.
        #expect(
            goertzel(out[240_000..<288_000], frequency: 440) > 100 * goertzel(out[240_000..<288_000], frequency: 1000))
    }

    @Test func everyStageOnProcessesWithoutErrors() throws {
        let processor = try AudioProcessor()
        #expect(processor.samplesPerChunk == 480)
        let out = try processAll(tone(seconds: 1, frequency: 440, amplitude: 5000), processor)
        #expect(out.count == 48_000)
        var far = [Int16](repeating: 0, count: 480)
        try far.withUnsafeMutableBufferPointer { (b: inout UnsafeMutableBufferPointer<Int16>) throws(CaptureError) in
            try processor.processReverse(b)
        }
    }

    @Test func processingOffPassesAudioThrough() throws {
        let t = tone(seconds: 0.5, frequency: 440, amplitude: 5000)
        let out = try processAll(t, AudioProcessor(options: .off))
        #expect(out == t)
    }

    @Test func wrongChunkSizeAndFormatAreErrors() throws {
        let processor = try AudioProcessor()
        var short = [Int16](repeating: 0, count: 100)
        #expect(throws: CaptureError.self) { try processor.process(&short) }
        #expect(throws: CaptureError.self) { _ = try AudioProcessor(sampleRate: 44_100) }
        #expect(throws: CaptureError.self) { _ = try AudioProcessor(channels: 3) }
    }

    @Test func ringDropsTheOldestWhenFull() {
        let ring = EncodedAudioRing(capacity: 3)
        for i in 0..<5 {
            let bytes: [UInt8] = [UInt8(i), 1, 2]
            bytes.withUnsafeBytes { ring.push($0, timestamp: UInt32(i * 960)) }
        }
        #expect(ring.droppedPackets == 2)
        var got: [EncodedFrame] = []
        while let f = ring.pop() { got.append(f) }
        #expect(got.map(\.timestamp) == [1920, 2880, 3840])
        #expect(got.map { $0.data.first } == [2, 3, 4])
        #expect(got.allSatisfy { $0.codec == .opus && $0.duration == 960 })
        #expect(ring.pop() == nil)
        for i in 0..<3 { [UInt8(i)].withUnsafeBytes { ring.push($0, timestamp: UInt32(i)) } }
        #expect(ring.discardOldest(keepingNewest: 1) == 2)
        #expect(ring.pop()?.timestamp == 2)
        #expect(ring.count == 0)
    }

    /// A 440 Hz tone captured through ALSA's file plugin, processed (AEC, NS, AGC, high-pass),
    /// Opus-encoded, then decoded here: the tone is what comes out.
    @Test func alsaCaptureOfAToneThroughProcessingAndOpus() throws {
        let raw = temporaryPath("tone-\(UUID().uuidString).raw")
        let samples = tone(seconds: 3, frequency: 440, amplitude: 8000)
        try samples.withUnsafeBytes { try Data($0).write(to: URL(fileURLWithPath: raw)) }
        let capture = try ALSACapture(
            device: "tonecap", configText: fileCaptureConfig(name: "tonecap", infile: raw), ringCapacity: 200)
        #expect(capture.deviceChannels == 1)
        capture.start()
        var frames: [EncodedFrame] = []
        let deadline = Date().addingTimeInterval(20)
        while frames.count < 100 && Date() < deadline {
            while let f = capture.ring.pop() { frames.append(f) }
            Thread.sleep(forTimeInterval: 0.02)
        }
        capture.stop()
        #expect(capture.failureMessage == nil)
        #expect(capture.processingErrors == 0)
        #expect(capture.chunksCaptured >= 200)
        #expect(frames.count >= 100, "packets captured: \(frames.count)")
        guard frames.count >= 100 else { return }
        #expect(capture.ring.droppedPackets == 0)
        // 20 ms apart on the 48 kHz clock.
        for (a, b) in zip(frames, frames.dropFirst()) { #expect(b.timestamp &- a.timestamp == 960) }
        let decoder = try OpusDecoder(channels: 1)
        var pcm: [Int16] = []
        for f in frames.prefix(100) { pcm += try decoder.decode(f.data) }
        #expect(pcm.count == 100 * 960)
        // Skip the first half second while the processing adapts.
        let steady = pcm[24_000..<96_000]
        let at440 = goertzel(steady, frequency: 440)
        #expect(rms(steady) > 1000, "decoded RMS \(rms(steady))")
        #expect(at440 > 50 * goertzel(steady, frequency: 1000), "440 Hz dominates")
        #expect(at440 > 50 * goertzel(steady, frequency: 200), "440 Hz dominates")
    }

    @Test func aDeviceThatCannotOpenNamesTheDeviceAndALSAsMessage() {
        do {
            _ = try ALSACapture(device: "hw:97,3")
            Issue.record("hw:97,3 opened")
        } catch {
            guard case .cannotOpen(let device, let message) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(device == "hw:97,3")
            #expect(!message.isEmpty)
            #expect(error.description.contains("'hw:97,3'"))
        }
        #expect(throws: CaptureError.self) { try ALSACapture.probe(device: "no_such_pcm_name") }
    }

    @Test func aBadConfigurationTextIsAnError() {
        #expect(throws: CaptureError.self) { _ = try ALSACapture(device: "x", configText: "pcm.x { type file ") }
        // A file plugin whose input does not exist fails at open, naming the device.
        let config = fileCaptureConfig(name: "missing", infile: "/nonexistent/dir/tone.raw")
        do {
            _ = try ALSACapture(device: "missing", configText: config)
            Issue.record("opened a capture with a missing infile")
        } catch {
            #expect(error.description.contains("'missing'"), "\(error)")
        }
    }
}

import Foundation
import RTCWire
import TestSupport
import Testing

@testable import Media

/// Pulls `source` as `MediaPump` would, in 10 ms steps of a simulated clock, for `seconds`.
func pullFrames(_ source: MediaSource, seconds: Double, from start: Double = 0) -> [EncodedFrame] {
    var frames: [EncodedFrame] = []
    var t = UInt64(start * 1e9)
    while t <= UInt64(seconds * 1e9) {
        source.pull(elapsedNanos: t) { f, _ in frames.append(f) }
        t += 10_000_000
    }
    return frames
}

@Suite(.serialized) struct MediaSourceTests {
    // MARK: Pacing and looping

    @Test func ivfVideoIsPacedByItsTimestampsAndLoops() throws {
        let files = try SourceFixtures.get()
        let source = try FileVideoSource(path: files.ivf)
        #expect(source.framesPerLoop == 60)
        let frames = pullFrames(source, seconds: 5)
        // 5 s at 30 fps: frames due at 0, 1/30, … 5 s.
        #expect(frames.count == 151)
        #expect(source.loops == 2)
        #expect(frames.first?.isKeyframe == true)
        for (a, b) in zip(frames, frames.dropFirst()) { #expect(b.timestamp &- a.timestamp == 3000) }
        // Each pass restarts on the file's first frame, a keyframe.
        #expect(frames[60].isKeyframe && frames[120].isKeyframe)
        #expect(frames[60].data == frames[0].data)
        #expect(frames.allSatisfy { $0.codec == .vp8 })
    }

    @Test func webmAndMatroskaVideoLoopWithIncreasingTimestamps() throws {
        let files = try SourceFixtures.get()
        for path in [files.webm, files.mkv] {
            let source = try FileVideoSource(path: path)
            let frames = pullFrames(source, seconds: 4.5)
            #expect(source.framesPerLoop == 60, "\(path)")
            #expect(frames.count >= 130, "\(path)")
            #expect(source.loops == 2)
            #expect(frames.first?.isKeyframe == true)
            for (a, b) in zip(frames, frames.dropFirst()) {
                let delta = b.timestamp &- a.timestamp
                // WebM stores milliseconds: 33 or 34 ms per frame at 90 kHz.
                #expect(delta >= 2970 && delta <= 3060, "\(path): delta \(delta)")
            }
        }
    }

    @Test func oggAndWebMAudioArePacedAndLoop() throws {
        let files = try SourceFixtures.get()
        for path in [files.ogg, files.opus, files.webm] {
            let source = try FileAudioSource(path: path)
            let frames = pullFrames(source, seconds: 5)
            #expect(source.framesPerLoop >= 100, "\(path)")
            #expect(source.loops == 2, "\(path)")
            // 20 ms packets: due at 0, 20 ms, … 5 s.
            #expect(frames.count == 251, "\(path)")
            for (a, b) in zip(frames, frames.dropFirst()) {
                #expect(b.timestamp &- a.timestamp == 960, "\(path)")
            }
            #expect(frames.allSatisfy { $0.codec == .opus && $0.duration == 960 })
        }
    }

    @Test func nothingIsSentBeforeItIsDue() throws {
        let files = try SourceFixtures.get()
        let source = try FileVideoSource(path: files.ivf)
        var count = 0
        source.pull(elapsedNanos: 0) { _, _ in count += 1 }
        #expect(count == 1)
        source.pull(elapsedNanos: 33_000_000) { _, _ in count += 1 }
        #expect(count == 1, "the second frame is due at 33.3 ms")
        source.pull(elapsedNanos: 34_000_000) { _, _ in count += 1 }
        #expect(count == 2)
    }

    @Test func aKeyframeRequestJumpsToTheNextKeyframe() throws {
        let files = try SourceFixtures.get()
        let source = try FileVideoSource(path: files.ivf)
        var frames = pullFrames(source, seconds: 0.1)  // frames 0…3
        #expect(frames.count == 4)
        source.requestKeyframe()
        frames += pullFrames(source, seconds: 0.2, from: 0.11)
        #expect(frames[4].isKeyframe, "the frame after a request is a keyframe")
        let frame15 = try IVFReader(path: files.ivf).frames[15].data
        #expect(frames[4].data == frame15, "content jumped to frame 15")
        #expect(source.keyframeJumps == 1)
        // The media clock did not jump with the content.
        for (a, b) in zip(frames, frames.dropFirst()) { #expect(b.timestamp &- a.timestamp == 3000) }
        // On a keyframe already, a request does not move the content.
        let fresh = try FileVideoSource(path: files.ivf)
        fresh.requestKeyframe()
        _ = pullFrames(fresh, seconds: 0)
        #expect(fresh.keyframeJumps == 0)
    }

    // MARK: Bad inputs

    @Test func unreadableAndUnsupportedFilesNameTheFileAndTheReason() throws {
        let files = try SourceFixtures.get()
        let dir = files.dir
        func expectError(_ path: String, video: Bool, contains: String) {
            do {
                if video { _ = try FileVideoSource(path: path) } else { _ = try FileAudioSource(path: path) }
                Issue.record("\(path) was accepted")
            } catch {
                #expect(error.description.contains(path), "\(error)")
                #expect(error.description.contains(contains), "\(error)")
            }
        }
        expectError(dir + "/missing.ivf", video: true, contains: "No such file")
        expectError(dir, video: true, contains: "Is a directory")
        let mp4 = dir + "/x.mp4"
        try Data([0, 0, 0, 24] + Array("ftypisom".utf8) + [UInt8](repeating: 0, count: 20)).write(
            to: URL(fileURLWithPath: mp4))
        expectError(mp4, video: true, contains: "MP4")
        let text = dir + "/notes.webm"
        try Data("hello, this is not a video".utf8).write(to: URL(fileURLWithPath: text))
        expectError(text, video: true, contains: "not an IVF, WebM/Matroska or Ogg file")
        let empty = dir + "/empty.ivf"
        try Data().write(to: URL(fileURLWithPath: empty))
        expectError(empty, video: true, contains: "empty")
        let badIVF = dir + "/bad.ivf"
        try Data(Array("DKIF".utf8) + [0, 0, 32, 0] + Array("VP90".utf8) + [UInt8](repeating: 0, count: 40)).write(
            to: URL(fileURLWithPath: badIVF))
        expectError(badIVF, video: true, contains: "not VP8")
        expectError(files.ogg, video: true, contains: "Ogg file holds audio")
        expectError(files.audioOnlyWebM, video: true, contains: "no video track")
        expectError(files.ivf, video: false, contains: "IVF file holds video")
        let badOgg = dir + "/bad.ogg"
        try Data(Array("OggS".utf8) + [UInt8](repeating: 1, count: 60)).write(to: URL(fileURLWithPath: badOgg))
        expectError(badOgg, video: false, contains: badOgg)
        // A WebM cut after its header has no frames to send.
        let cut = dir + "/cut.webm"
        let whole = try Data(contentsOf: URL(fileURLWithPath: files.webm))
        try whole.prefix(300).write(to: URL(fileURLWithPath: cut))
        expectError(cut, video: true, contains: cut)
    }

    // MARK: CLI strings

    @Test func optionsParseAndValidate() throws {
        let files = try SourceFixtures.get()
        #expect(LocalSources.video(nil) == .testPattern)
        #expect(LocalSources.video("none") == .none)
        #expect(LocalSources.video(files.ivf) == .file(files.ivf))
        #expect(LocalSources.audio(nil) == .tone)
        #expect(LocalSources.audio("alsa:hw:1,0") == .alsa(device: "hw:1,0"))
        #expect(!LocalSources.publishes(.video, video: "none", audio: nil))
        #expect(LocalSources.publishes(.audio, video: "none", audio: nil))

        try LocalSources.validate(video: nil, audio: nil)
        try LocalSources.validate(video: files.webm, audio: files.webm)
        try LocalSources.validate(video: files.ivf, audio: files.ogg)
        try LocalSources.validate(video: "none", audio: "none")
        do {
            try LocalSources.validate(video: "x.mp4", audio: nil)
            Issue.record("x.mp4 accepted")
        } catch {
            #expect(error.description.hasPrefix("--video: 'x.mp4' is not testsrc, none or a readable .ivf/.webm file"))
            #expect(!error.description.contains("\n"))
        }
        do {
            try LocalSources.validate(video: nil, audio: files.ivf)
            Issue.record("an IVF accepted as audio")
        } catch {
            #expect(error.description.hasPrefix("--audio: '\(files.ivf)' is not tone, none, alsa:DEVICE"))
        }
        do {
            try LocalSources.validate(video: nil, audio: "alsa:hw:97,1")
            Issue.record("a missing ALSA device accepted")
        } catch {
            #expect(error.description.hasPrefix("--audio: 'alsa:hw:97,1' is not a usable capture device"), "\(error)")
            // The cause is kept as a value, not only as text.
            guard case .badOption(_, _, .capture(.cannotOpen(let device, _))?) = error else {
                Issue.record("no capture error as the cause: \(error)")
                return
            }
            #expect(device == "hw:97,1")
        }
        #expect(throws: MediaSourceError.self) { try LocalSources.validate(video: nil, audio: "alsa:") }
    }

    @Test func factoryMakesTheChosenSourcesAndRefusesNone() throws {
        let files = try SourceFixtures.get()
        #expect(try LocalSources.factory(video: nil, audio: "tone") == nil, "defaults: the SDK's synthetic sources")
        guard let factory = try LocalSources.factory(video: files.ivf, audio: "none") else {
            Issue.record("no factory")
            return
        }
        let video = try factory(.video, 3)
        #expect(video is FileVideoSource)
        #expect(video.layerCount == 1)
        do {
            _ = try factory(.audio, 1)
            Issue.record("audio none made a source")
        } catch let error as MediaSourceError {
            #expect(error == .notPublished(.audio))
        }
        let mixed = try #require(try LocalSources.factory(video: "testsrc", audio: files.ogg))
        #expect(try mixed(.video, 3) is SyntheticVideoSource)
        #expect(try mixed(.video, 3).layerCount == 3)
        #expect(try mixed(.audio, 1) is FileAudioSource)
        #expect(throws: MediaSourceError.self) {
            _ = try LocalSources.factory(video: files.dir + "/nope.ivf", audio: nil)
        }
    }

    // MARK: ALSA

    /// ALSA's `null` PCM (always present, no sound card): through the CLI strings to a source that
    /// captures, processes and encodes in real time, and closes.
    @Test func alsaNullDeviceThroughTheFactory() async throws {
        try LocalSources.validate(video: "none", audio: "alsa:null")
        let factory = try #require(try LocalSources.factory(video: "none", audio: "alsa:null"))
        let source = try factory(.audio, 1)
        let alsa = try #require(source as? ALSAAudioSource)
        var frames: [EncodedFrame] = []
        for _ in 0..<300 where frames.count < 25 {
            source.pull(elapsedNanos: 0) { f, _ in frames.append(f) }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        source.close()
        #expect(frames.count >= 25)
        #expect(alsa.capture.failureMessage == nil)
        for (a, b) in zip(frames, frames.dropFirst()) { #expect(b.timestamp &- a.timestamp == 960) }
        let decoder = try OpusDecoder(channels: 1)
        for f in frames { #expect(try decoder.decode(f.data).count == 960) }
        source.close()  // closing twice is harmless
    }
}

/// One media clock for a participant's local sources (issue 14: A/V sync under a busy machine).
@Suite struct MediaClockTests {
    /// The audio starts at clock 0, the video 71 ms later (its pump a few loop turns late) and jumps
    /// ahead to a keyframe at once (the SFU's first PLI): a recording of what they send, judged by
    /// the sync-marker analyzer, shows the flash and the beep together. (With a clock of its own the
    /// video is 216 ms off here.)
    @Test func audioAndVideoOnOneClockStayInSyncWhateverTheStartAndKeyframeJumps() throws {
        let media = SyntheticMedia.shared(layers: 1)
        let clock = MediaClock()
        let audio = SyntheticAudioSource(media: media)
        let video = SyntheticVideoSource(media: media)
        audio.use(clock: clock)
        video.use(clock: clock)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("clock-\(UUID().uuidString).webm").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let recording = try Recording(path: path)
        let origin: UInt64 = 1_000_000_000
        var now: UInt64 = 0
        while now <= 9_000_000_000 {
            audio.pull(elapsedNanos: now) { frame, _ in recording.write(frame, arrival: origin + now) }
            if now >= 71_000_000 {
                if now == 80_000_000 || now == 4_330_000_000 { video.requestKeyframe() }
                video.pull(elapsedNanos: now) { frame, _ in recording.write(frame, arrival: origin + now) }
            }
            now += 10_000_000
        }
        try recording.close()
        #expect(video.keyframeJumps >= 1)
        let sync = try SyncMarkerAnalyzer.analyze(reader: try WebMReader(path: path))
        let offset = try #require(sync.offsetMilliseconds, "no flash/beep pair")
        #expect(sync.pairs >= 2)
        #expect(abs(offset) <= 20, "A/V offset \(offset) ms")
    }
}

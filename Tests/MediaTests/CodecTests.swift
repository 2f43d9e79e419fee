import Media
import RTCWire
import Testing

@Suite("Media codecs")
struct CodecTests {
    @Test func opusRoundTripKeepsEnergy() throws {
        let encoder = try OpusEncoder(channels: 1, bitrate: 48_000, inbandFEC: true)
        let decoder = try OpusDecoder(channels: 1)
        let tone = ToneSource()
        var inEnergy = 0.0
        var outEnergy = 0.0
        for i in 0..<50 {
            let pcm = tone.frame(at: i)
            let packet = try encoder.encode(pcm: pcm)
            #expect(!packet.isEmpty && packet.count < 400)
            #expect(OpusDecoder.sampleCount(of: packet) == 960)
            let out = try decoder.decode(packet)
            #expect(out.count == 960)
            if i >= 5 {  // skip the encoder's start-up delay
                inEnergy += pcm.reduce(0.0) { $0 + Double($1) * Double($1) }
                outEnergy += out.reduce(0.0) { $0 + Double($1) * Double($1) }
            }
        }
        #expect(inEnergy > 0)
        let ratio = outEnergy / inEnergy
        #expect(ratio > 0.5 && ratio < 2.0, "decoded/input energy ratio \(ratio)")
        let concealed = try decoder.decode(nil)
        #expect(concealed.count == 960)
        #expect(encoder.lookahead > 0)
    }

    @Test func opusRejectsWrongFrameSize() throws {
        let encoder = try OpusEncoder()
        #expect(throws: MediaError.self) { try encoder.encode(pcm: [Int16](repeating: 0, count: 100)) }
        #expect(throws: MediaError.self) { try OpusEncoder(channels: 3) }
    }

    @Test func vp8EncodeDecodeKeepsSizeAndKeyframes() throws {
        let encoder = try VP8Encoder(width: 320, height: 180, fps: 30, bitrate: 300_000, keyframeInterval: 1000)
        let decoder = try VP8Decoder()
        let pattern = TestPatternSource(width: 320, height: 180)
        var keyframes: [Int] = []
        for i in 0..<12 {
            if i == 7 { encoder.forceKeyframe() }
            let frames = try encoder.encode(i420: pattern.frame(at: i))
            #expect(frames.count == 1)
            for f in frames {
                #expect(f.codec == .vp8)
                #expect(f.timestamp == UInt32(i * 3000))
                if f.isKeyframe {
                    keyframes.append(i)
                    let size = VP8KeyframeInfo.parse(f.data)
                    #expect(size?.width == 320 && size?.height == 180)
                } else {
                    #expect(VP8KeyframeInfo.parse(f.data) == nil)
                }
                let picture = try #require(try decoder.decode(f.data))
                #expect(picture.width == 320 && picture.height == 180)
                #expect(picture.isConsistent)
            }
        }
        #expect(keyframes == [0, 7])
    }

    @Test func vp8RejectsBadInput() throws {
        #expect(throws: MediaError.self) { try VP8Encoder(width: 321, height: 180) }
        let encoder = try VP8Encoder(width: 64, height: 64)
        #expect(throws: MediaError.self) { try encoder.encode(i420: I420Image(width: 32, height: 32)) }
        let decoder = try VP8Decoder()
        #expect(throws: MediaError.self) { try decoder.decode([0x00, 0x01, 0x02, 0x03, 0x04]) }
        #expect(throws: MediaError.self) { try decoder.decode([]) }
    }

    @Test func keyframeHeaderParsing() {
        // tag (key, show), start code, 14-bit width 640 / height 360 with scale bits set.
        let frame: [UInt8] = [0x10, 0x02, 0x00, 0x9D, 0x01, 0x2A, 0x80, 0x42, 0x68, 0x81]
        let size = VP8KeyframeInfo.parse(frame)
        #expect(size?.width == 640 && size?.height == 360)
        #expect(VP8KeyframeInfo.parse(Array(frame.prefix(9))) == nil)
        var delta = frame
        delta[0] |= 1
        #expect(VP8KeyframeInfo.parse(delta) == nil)
        var badStart = frame
        badStart[4] = 0
        #expect(VP8KeyframeInfo.parse(badStart) == nil)
    }
}

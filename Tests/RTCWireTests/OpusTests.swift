import Testing

@testable import RTCWire

private func opusDuration(_ bytes: [UInt8]) throws(OpusError) -> Int {
    var result: Result<Int, OpusError> = .success(0)
    bytes.withUnsafeBytes { raw in
        do throws(OpusError) { result = .success(try OpusTOC.packetDuration(raw)) } catch {
            result = .failure(error)
        }
    }
    return try result.get()
}

private func opusError(_ bytes: [UInt8]) -> OpusError? {
    do {
        _ = try opusDuration(bytes)
        return nil
    } catch { return error }
}

@Suite struct OpusTOCTests {
    @Test func tocFields() {
        let toc = OpusTOC(0xFC)  // config 31, stereo, code 0
        #expect(toc.config == 31)
        #expect(toc.stereo)
        #expect(toc.frameCountCode == 0)
        #expect(toc.byte == 0xFC)
    }

    @Test func frameDurationsForAllConfigs() {
        let expected = [
            480, 960, 1920, 2880, 480, 960, 1920, 2880, 480, 960, 1920, 2880,  // SILK
            480, 960, 480, 960,  // Hybrid
            120, 240, 480, 960, 120, 240, 480, 960, 120, 240, 480, 960, 120, 240, 480, 960,  // CELT
        ]
        #expect((0..<32).map { OpusTOC(UInt8($0) << 3).frameDuration } == expected)
    }

    @Test func packetDurations() throws {
        #expect(try opusDuration([0xF8, 0x01, 0x02]) == 960)  // code 0, 20 ms
        #expect(try opusDuration([0xF9, 0x01, 0x02]) == 1920)  // code 1: two equal frames
        #expect(try opusDuration([0xFA, 0x01, 0xAA, 0xBB]) == 1920)  // code 2
        #expect(try opusDuration([0xFB, 0x03, 0, 0, 0]) == 2880)  // code 3, 3 frames
        #expect(try opusDuration([0x03, 12]) == 5760)  // SILK 10 ms x 12 = 120 ms
        #expect(try opusDuration([0x83, 48]) == 5760)  // CELT 2.5 ms x 48
    }

    @Test func malformedPackets() {
        #expect(opusError([]) == .empty)
        #expect(opusError([0xF9, 0x01]) == .badCode1Length)
        #expect(opusError([0xFA]) == .badCode2Length)
        #expect(opusError([0xFA, 0x05, 0x00]) == .badCode2Length)
        #expect(opusError([0xFA, 0xFC]) == .badCode2Length)  // two-byte length cut off
        #expect(opusError([0xFB]) == .missingFrameCount)
        #expect(opusError([0xFB, 0x00]) == .zeroFrames)
        #expect(opusError([0xFB, 0x07]) == .tooLong(samples: 6720))
        #expect(opusError([0x03, 13]) == .tooLong(samples: 6240))
    }
}

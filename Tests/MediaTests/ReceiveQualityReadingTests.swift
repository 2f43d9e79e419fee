import Media
import RTCWire
import Testing

/// A track's reading in one line, as load reports and scenario failures show it.
@Suite struct ReceiveQualityReadingTests {
    @Test func videoReadingNamesFramesFreezesAndPauses() {
        var q = ReceiveQualitySnapshot(kind: "video")
        q.frames = 300
        q.framesPerSecond = 30
        q.freezeCount = 3
        q.totalFreezesDurationMs = 1200
        q.lossPercent = 0.5
        q.jitterMs = 2.3
        q.jitterBufferDelayMs = 40
        q.pauseCount = 1
        #expect(
            q.reading
                == "300 frames, 30.0 fps, freezes 3 (1200 ms), loss 0.50%, jitter 2.3 ms, buffer 40.0 ms, 1 pauses")
    }

    @Test func audioReadingNamesConcealmentAndMOS() {
        var q = ReceiveQualitySnapshot(kind: "audio")
        q.frames = 1500
        q.concealmentPercent = 1.25
        q.mos = 4.3
        #expect(q.reading == "1500 packets played, 1.25% concealed, MOS 4.30, loss 0.00%, jitter 0.0 ms, buffer 0.0 ms")
    }
}

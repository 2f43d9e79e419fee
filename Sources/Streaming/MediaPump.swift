import Media
import RTC
import RTCWire

/// Sends a pre-encoded ``SyntheticMedia`` loop on a peer connection in real time.
///
/// It runs as a ticker on the connection's loop thread: each tick sends every frame that is due, so
/// no thread or task exists per stream. Frames are shared, never re-encoded. On a keyframe request
/// it jumps to the next keyframe of the loop, since a pre-encoded stream cannot make a new one.
public final class MediaPump: EventLoopTicker, @unchecked Sendable {
    let connection: PeerConnection
    let media: SyntheticMedia
    let video: RTPTransceiver?
    let audio: RTPTransceiver?
    var start: UInt64?
    var videoIndex = 0
    var audioIndex = 0
    /// Added to the video index to pick content: moves forward to reach a keyframe on request.
    var contentOffset = 0
    var keyframeWanted = false
    /// Frames sent so far.
    public private(set) var videoFramesSent = 0
    public private(set) var audioFramesSent = 0
    public private(set) var keyframeJumps = 0

    /// Creates a pump; call ``start()`` on the loop thread (or via ``attach()``).
    public init(connection: PeerConnection, media: SyntheticMedia, video: RTPTransceiver?, audio: RTPTransceiver?) {
        self.connection = connection
        self.media = media
        self.video = video
        self.audio = audio
    }

    /// Registers the pump with the connection's loop. Must run on the loop thread.
    public func attach() {
        let previous = connection.onKeyframeRequest
        connection.onKeyframeRequest = { [weak self] t in
            previous?(t)
            if let self, t === self.video { self.keyframeWanted = true }
        }
        connection.loop.addTicker(self)
    }

    /// Stops sending. Must run on the loop thread.
    public func detach() {
        connection.loop.removeTicker(self)
    }

    public func tick(now: UInt64) {
        guard connection.state == .connected else { return }
        if start == nil { start = now }
        let elapsed = now - (start ?? now)
        if let video, !media.videoFrames.isEmpty {
            let frameNanos = 1_000_000_000 / UInt64(media.fps)
            while UInt64(videoIndex) * frameNanos <= elapsed {
                sendVideo(on: video)
                videoIndex += 1
            }
        }
        if let audio, !media.audioFrames.isEmpty {
            while UInt64(audioIndex) * 20_000_000 <= elapsed {
                if var frame = media.audioFrame(at: audioIndex) {
                    frame.timestamp = UInt32(truncatingIfNeeded: audioIndex &* 960)
                    connection.send(frame, on: audio)
                    audioFramesSent += 1
                }
                audioIndex += 1
            }
        }
    }

    func sendVideo(on transceiver: RTPTransceiver) {
        if keyframeWanted {
            keyframeWanted = false
            let perLoop = media.videoFrames[0].count
            var j = videoIndex + contentOffset
            while !(media.videoFrames[0][j % perLoop].isKeyframe) && j < videoIndex + contentOffset + perLoop { j += 1 }
            if j != videoIndex + contentOffset { keyframeJumps += 1 }
            contentOffset = j - videoIndex
        }
        let layers = max(1, transceiver.sendRIDs.count)
        for layer in 0..<layers {
            guard var frame = media.videoFrame(at: videoIndex + contentOffset, layer: layer) else { continue }
            // Media time follows the wall clock even when content jumps ahead.
            frame.timestamp = UInt32(truncatingIfNeeded: videoIndex &* (90_000 / media.fps))
            connection.send(frame, on: transceiver, layer: layer)
        }
        videoFramesSent += 1
    }
}

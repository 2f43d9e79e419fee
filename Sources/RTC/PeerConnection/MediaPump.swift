import RTCWire

/// Sends the frames of local ``MediaSource``s on a peer connection in real time.
///
/// It runs as a ticker on the connection's loop thread: each tick pulls every frame that is due, so
/// no thread or task exists per stream. A keyframe request for the video transceiver is passed to
/// the video source.
// Safe: a ticker confined to its connection's loop thread; Sendable only to be handed to it.
public final class MediaPump: EventLoopTicker, @unchecked Sendable {
    let connection: PeerConnection
    let video: RTPTransceiver?
    let audio: RTPTransceiver?
    /// The video source, pulled on the loop thread (nil when no video is sent).
    public let videoSource: MediaSource?
    /// The audio source, pulled on the loop thread (nil when no audio is sent).
    public let audioSource: MediaSource?
    /// The media clock shared with the other pumps of the same participant.
    public let clock: MediaClock
    /// Video frames sent so far (a simulcast frame counts once).
    public private(set) var videoFramesSent = 0
    /// Audio frames sent so far.
    public private(set) var audioFramesSent = 0
    /// When set, the video layers that go out follow the connection's bandwidth estimate (see
    /// ``EstimateLayerFitter``); nil sends every layer the transceiver has a sender for.
    public var layerFitter: EstimateLayerFitter?

    /// Creates a pump sending `videoSource` on `video` and `audioSource` on `audio`; call
    /// ``attach()`` on the loop thread.
    /// `clock` is shared by every pump of one participant (default: a clock of this pump's own).
    public init(
        connection: PeerConnection, video: RTPTransceiver?, videoSource: MediaSource?, audio: RTPTransceiver?,
        audioSource: MediaSource?, clock: MediaClock = MediaClock()
    ) {
        self.connection = connection
        self.video = videoSource == nil ? nil : video
        self.audio = audioSource == nil ? nil : audio
        self.videoSource = video == nil ? nil : videoSource
        self.audioSource = audio == nil ? nil : audioSource
        self.clock = clock
        self.videoSource?.use(clock: clock)
        self.audioSource?.use(clock: clock)
    }

    /// Creates a pump sending a source from `source(kind, layers)` on each given transceiver, with as
    /// many layers as the video transceiver has simulcast RIDs (for example `SyntheticMedia.source`).
    ///
    /// With `fitToEstimate`, the video follows the connection's bandwidth estimate
    /// (``layerFitter``): a simulcast transceiver stops the layers that do not fit, and a
    /// single-stream one gets a three-layer source and sends the layer that fits.
    public convenience init(
        connection: PeerConnection, video: RTPTransceiver?, audio: RTPTransceiver?, fitToEstimate: Bool = false,
        sources source: (_ kind: MediaKind, _ layers: Int) -> MediaSource
    ) {
        let simulcast = (video?.sendRIDs.count ?? 0) > 1
        let layers = simulcast ? video!.sendRIDs.count : fitToEstimate ? 3 : 1
        self.init(
            connection: connection, video: video,
            videoSource: video.map { _ in source(.video, layers) }, audio: audio,
            audioSource: audio.map { _ in source(.audio, 1) })
        if fitToEstimate, let videoSource, videoSource.layerCount > 1 {
            layerFitter = EstimateLayerFitter(
                mode: simulcast ? .simulcast : .single, layerCount: videoSource.layerCount)
        }
    }

    /// Times the pre-encoded video source (synthetic or file) jumped ahead to a keyframe on request.
    public var keyframeJumps: Int { videoSource?.keyframeJumps ?? 0 }

    /// Registers the pump with the connection's loop. Must run on the loop thread.
    public func attach() {
        connection.loop.assertInLoop()
        let previous = connection.onKeyframeRequest
        connection.onKeyframeRequest = { [weak self] t in
            previous?(t)
            if let self, t === self.video { self.videoSource?.requestKeyframe() }
        }
        connection.loop.addTicker(self)
    }

    /// Stops sending. Must run on the loop thread. The sources stay open (see ``close()``).
    public func detach() {
        connection.loop.assertInLoop()
        connection.loop.removeTicker(self)
    }

    /// Stops sending and closes the sources. Must run on the loop thread.
    public func close() {
        detach()
        videoSource?.close()
        audioSource?.close()
    }

    /// Sends every frame due at loop time `now` while the connection is up (called by the loop).
    public func tick(now: UInt64) {
        guard connection.state == .connected else { return }
        let elapsed = clock.elapsed(now: now)
        if let video, let videoSource {
            var lastTimestamp: UInt32?
            if layerFitter != nil { layerFitter!.update(estimate: connection.bandwidthEstimate, now: now) }
            videoSource.pull(elapsedNanos: elapsed) { frame, layer in
                var out = layer
                if layerFitter != nil {
                    layerFitter!.observe(layer: layer, bytes: frame.data.count, now: now)
                    guard let chosen = layerFitter!.route(layer: layer, isKeyframe: frame.isKeyframe) else { return }
                    out = chosen
                }
                connection.send(frame, on: video, layer: out)
                if frame.timestamp != lastTimestamp {
                    lastTimestamp = frame.timestamp
                    videoFramesSent += 1
                }
            }
        }
        if let audio, let audioSource {
            audioSource.pull(elapsedNanos: elapsed) { frame, _ in
                connection.send(frame, on: audio)
                audioFramesSent += 1
            }
        }
    }
}

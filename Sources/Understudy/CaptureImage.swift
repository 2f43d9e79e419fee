import Foundation
import Media
import RTCWire

/// Whether ``Participant/captureImage(width:height:flash:)`` lights the scene first.
public enum CaptureFlash: String, Sendable, Hashable {
    /// Lights the scene: the capture waits for a picture taken with the light on.
    case ON
    /// Captures the current picture as it is.
    case OFF
}

/// A light that ``Participant/captureImage(width:height:flash:)`` turns on while it captures with
/// `flash: .ON` on a camera without a torch (docs/spec/participant-methods.md: a front camera lit by the screen).
/// Set it with ``VideoSDK/setScreenFlash(_:)``.
///
/// A headless participant has no torch, so with a screen flash set every flash capture of the local
/// participant calls ``apply()`` before it takes the picture and ``clear()`` after it, whether or
/// not the capture succeeds. Both run off the room's event queue.
public protocol ScreenFlash: AnyObject, Sendable {
    /// Lights the scene; the capture starts when this returns.
    func apply() async
    /// Turns the light off again.
    func clear() async
}

/// SDK-wide settings (the documented `VideoSDK` namespace).
public enum VideoSDK {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var _screenFlash: (any ScreenFlash)?

    /// Sets the screen flash that flash captures use (nil: none; the image is captured unlit).
    public static func setScreenFlash(_ flash: (any ScreenFlash)?) { lock.withLock { _screenFlash = flash } }

    /// The screen flash set with ``setScreenFlash(_:)``.
    public static var screenFlash: (any ScreenFlash)? { lock.withLock { _screenFlash } }
}

/// The documented screen flash (docs/spec/participant-methods.md:440): a white overlay over `window`
/// while a flash capture runs.
///
/// Understudy is headless: there is no window to cover, so ``apply()`` and ``clear()`` light
/// nothing. They are still called around every flash capture (``ScreenFlash``), so code written
/// against the documented API runs unchanged, and ``isLit`` tells whether a capture is under way.
// Safe: `isLit` is guarded by `lock`.
public final class WhiteOverlayScreenFlash: ScreenFlash, @unchecked Sendable {
    private let lock = NSLock()
    private var lit = false
    /// The window the overlay would cover (kept, never drawn on by a headless participant).
    public let window: Any?

    /// An overlay for `window` (a `UIWindow` on iOS; any value, or nil, here).
    public init(window: Any?) { self.window = window }

    /// Whether a flash capture has the overlay up now.
    public var isLit: Bool { lock.withLock { lit } }
    /// Puts the (headless: invisible) overlay up.
    public func apply() async { lock.withLock { lit = true } }
    /// Takes it down.
    public func clear() async { lock.withLock { lit = false } }
}

/// One webcam's frames from a key frame on, all of one codec: what a capture decodes.
struct CaptureRun: Sendable, Equatable {
    var codec: MediaCodec
    var frames: [[UInt8]]
}

/// The frames of one webcam since its last keyframe, whatever its codec, kept so that a capture can
/// decode the current picture on demand instead of decoding every frame all the time.
///
/// Bounded: past ``maxFrames`` or ``maxBytes`` without a keyframe the frames are dropped and the
/// buffer waits for the next keyframe (a capture then asks the sender for one).
// Safe: the frames are guarded by `lock` (loop thread writes, captures read).
final class CaptureFrameBuffer: @unchecked Sendable {
    static let maxFrames = 300
    static let maxBytes = 16 << 20
    private let lock = NSLock()
    private var codec: MediaCodec = .vp8
    private var frames: [[UInt8]] = []
    private var bytes = 0
    private var _pictureSize: (width: Int, height: Int)?
    /// Captures waiting for a keyframe (``framesFromNextKeyframe(timeout:)``), by waiter id.
    private var waiters: [Int: CheckedContinuation<CaptureRun?, Never>] = [:]
    private var lastWaiterID = 0

    /// The picture size of the newest keyframe (for the stats' `size`), nil before the first one.
    var pictureSize: (width: Int, height: Int)? { lock.withLock { _pictureSize } }

    /// Called for every received (or sent) webcam frame.
    func append(_ frame: EncodedFrame) {
        guard frame.codec.kind == .video, !frame.data.isEmpty else { return }
        let keySize = frame.keyframePictureSize
        var woken: [CheckedContinuation<CaptureRun?, Never>] = []
        defer { for w in woken { w.resume(returning: CaptureRun(codec: frame.codec, frames: [frame.data])) } }
        lock.withLock {
            if let keySize {
                _pictureSize = keySize
                codec = frame.codec
                frames.removeAll(keepingCapacity: true)
                bytes = 0
                if !waiters.isEmpty {
                    woken = Array(waiters.values)
                    waiters.removeAll()
                }
            } else if frames.isEmpty || frame.codec != codec {
                // A delta frame cannot be decoded without its keyframe (nor one of another codec's run).
                frames.removeAll()
                bytes = 0
                return
            } else if frames.count >= Self.maxFrames || bytes + frame.data.count > Self.maxBytes {
                frames.removeAll()
                bytes = 0
                return
            }
            frames.append(frame.data)
            bytes += frame.data.count
        }
    }

    /// The frames from the last keyframe on (nil while waiting for a keyframe).
    var snapshot: CaptureRun? { lock.withLock { frames.isEmpty ? nil : CaptureRun(codec: codec, frames: frames) } }

    /// The frames from the last keyframe on; when there are none, waits for the next keyframe, up to
    /// `timeout` seconds (nil after that, or when the stream stops meanwhile: ``clear()``).
    func framesFromNextKeyframe(timeout: Double) async -> CaptureRun? {
        await withCheckedContinuation { (c: CheckedContinuation<CaptureRun?, Never>) in
            let id: Int? = lock.withLock {
                if !frames.isEmpty { return nil }
                lastWaiterID += 1
                waiters[lastWaiterID] = c
                return lastWaiterID
            }
            guard let id else { return c.resume(returning: snapshot) }
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) {
                self.lock.withLock { self.waiters.removeValue(forKey: id) }?.resume(returning: nil)
            }
        }
    }

    func clear() {
        let woken: [CheckedContinuation<CaptureRun?, Never>] = lock.withLock {
            frames.removeAll()
            bytes = 0
            _pictureSize = nil
            defer { waiters.removeAll() }
            return Array(waiters.values)
        }
        for w in woken { w.resume(returning: nil) }
    }
}

/// The picture size of a video stream's newest keyframe (for the stats' `size`), without keeping frames.
// Safe: the size is guarded by `lock`.
final class PictureSizeTracker: @unchecked Sendable {
    private let lock = NSLock()
    private var size: (width: Int, height: Int)?

    func note(_ frame: EncodedFrame) {
        guard let keySize = frame.keyframePictureSize else { return }
        lock.withLock { size = keySize }
    }

    var pictureSize: (width: Int, height: Int)? { lock.withLock { size } }
    func clear() { lock.withLock { size = nil } }
}

/// The previous `getTransportStats` totals of a participant, for its bitrates.
// Safe: the totals are guarded by `lock`.
final class TransportSample: @unchecked Sendable {
    typealias Totals = (sent: Int, received: Int, at: Date)
    private let lock = NSLock()
    /// Reference readings, renewed at most once a second: every caller measures against the same
    /// one, so two callers polling the same participant do not shorten each other's interval.
    private var older: Totals?
    private var newer: Totals?

    /// Whether a reference reading exists (false before the first call).
    var hasReference: Bool { lock.withLock { newer != nil } }

    /// kbps between a reference reading (at least half a second old when one is) and `sent`/`received`;
    /// 0 when a total went backwards.
    func rates(sent: Int, received: Int) -> (send: Double, receive: Double) {
        let now = Date()
        return lock.withLock {
            let reference: Totals? =
                if let n = newer, now.timeIntervalSince(n.at) >= 0.5 { n } else { older ?? newer }
            if newer.map({ now.timeIntervalSince($0.at) >= 1 }) ?? true {
                older = newer
                newer = (sent, received, now)
            }
            guard let p = reference, sent >= p.sent, received >= p.received else { return (0, 0) }
            let seconds = now.timeIntervalSince(p.at)
            guard seconds > 0 else { return (0, 0) }
            return (Double(sent - p.sent) * 8 / 1000 / seconds, Double(received - p.received) * 8 / 1000 / seconds)
        }
    }
}

/// Wraps a local video source and keeps its largest layer's frames for captures of the local webcam.
/// (Layer order differs between sources, so the largest layer is found from the keyframes' sizes.)
final class CaptureTapSource: MediaSource {
    let inner: MediaSource
    /// Nil for a screen share: only its sizes are kept.
    let buffer: CaptureFrameBuffer?
    private var capturedLayer: Int?
    private var capturedWidth = 0
    private let sizeLock = NSLock()
    private var layerSizes: [Int: (width: Int, height: Int)] = [:]

    /// The picture size of each layer's newest keyframe (for the stats' `size`).
    func size(ofLayer layer: Int) -> (width: Int, height: Int)? { sizeLock.withLock { layerSizes[layer] } }
    var kind: MediaKind { inner.kind }
    var codec: MediaCodec { inner.codec }
    var layerCount: Int { inner.layerCount }

    init(_ inner: MediaSource, buffer: CaptureFrameBuffer?) {
        self.inner = inner
        self.buffer = buffer
    }

    func use(clock: MediaClock) { inner.use(clock: clock) }

    func pull(elapsedNanos: UInt64, emit: (EncodedFrame, Int) -> Void) {
        inner.pull(elapsedNanos: elapsedNanos) { frame, layer in
            if let size = frame.keyframePictureSize {
                if size.width > capturedWidth {
                    capturedLayer = layer
                    capturedWidth = size.width
                }
                if layerSizes[layer].map({ $0 != size }) ?? true { sizeLock.withLock { layerSizes[layer] = size } }
            }
            if layer == capturedLayer { buffer?.append(frame) }
            emit(frame, layer)
        }
    }

    func requestKeyframe() { inner.requestKeyframe() }
    func close() {
        inner.close()
        buffer?.clear()
    }
}

extension Participant {
    /// Subscribe loop thread: a received video frame of this participant (webcam kept for captures).
    func receivedVideoFrame(_ frame: EncodedFrame, kind: StreamKind) {
        if kind == .video {
            captureFrames.append(frame)
        } else if kind == .share {
            sharePictureSize.note(frame)
        }
    }

    /// Captures the participant's current webcam picture as a base64-encoded JPEG.
    ///
    /// Works for the local participant (its own camera) and for a remote participant whose webcam
    /// video this device receives. The picture is scaled down to fit within `width` × `height` pixels
    /// keeping its aspect ratio, and never enlarged; a nil (or infinite) bound does not constrain, so
    /// without both the image has the size of the video. Fractional bounds are rounded down.
    ///
    /// The picture is decoded on demand from the frames since the webcam's last keyframe, in
    /// whatever codec it uses (VP8, VP9, H.264 or AV1: Media's `VideoDecoder`); when none is kept (just
    /// subscribed, or a long run without one) a keyframe is asked for and waited for up to 5 s.
    ///
    /// `flash: .ON` is accepted only for the local participant. A headless participant has no torch:
    /// the screen flash set with ``VideoSDK/setScreenFlash(_:)`` is applied around the capture (a
    /// no-op hook for ``WhiteOverlayScreenFlash``, which has no screen to light), and without one the
    /// image is captured unlit. A second flash capture while one runs is refused.
    ///
    /// Unlike the other methods it is not refused before the join or while reconnecting: it throws
    /// 3062 then, because no webcam video is received.
    ///
    /// - Throws: 3068 on an agent participant; 3062 (`ERROR_WEBCAM_NOT_ENABLED`) when the webcam is off
    ///   or not received on this device; 3069 (`ERROR_CAPTURE_IMAGE_FAILED`, also sent to `onError`)
    ///   when the capture fails (no keyframe within 5 s, or no frame of the run decodes), for
    ///   `flash: .ON` on a remote participant, for a bound that is not a
    ///   positive number, or while another flash capture runs.
    public func captureImage(width: CGFloat? = nil, height: CGFloat? = nil, flash: CaptureFlash = .OFF) async throws
        -> String
    {
        if isAgent() {
            throw UnderstudyError(code: 3068, message: "captureImage is not supported on an agent participant")
        }
        if flash == .ON && !isLocal {
            throw captureFailed("flash .ON works only for the local participant")
        }
        let maxWidth = try pixelBound(width, "width")
        let maxHeight = try pixelBound(height, "height")
        guard hasStream(.video) else {
            throw UnderstudyError(
                code: 3062,
                message: isLocal
                    ? "captureImage: the webcam is off" : "captureImage: this device does not receive \(id)'s webcam")
        }
        if flash == .ON {
            guard beginFlashCapture() else { throw captureFailed("another capture with flash is running") }
        }
        defer { if flash == .ON { endFlashCapture() } }
        let screenFlash = flash == .ON ? VideoSDK.screenFlash : nil
        await screenFlash?.apply()
        do {
            let image = try await captureCurrentPicture(maxWidth: maxWidth, maxHeight: maxHeight)
            await screenFlash?.clear()
            return image
        } catch {
            await screenFlash?.clear()
            throw error
        }
    }

    /// The newest picture from its keyframe on, scaled and encoded (``captureImage(width:height:flash:)``).
    private func captureCurrentPicture(maxWidth: Int?, maxHeight: Int?) async throws(UnderstudyError) -> String {
        var run = captureFrames.snapshot
        if run == nil {
            // The buffer waits for a keyframe (just started, or dropped a too-long run): ask for one.
            if !isLocal { room?.media.requestWebcamKeyframe(of: id) }
            if hasStream(.video) { run = await captureFrames.framesFromNextKeyframe(timeout: 5) }
        }
        guard let run else {
            if !hasStream(.video) { throw UnderstudyError(code: 3062, message: "captureImage: the webcam stopped") }
            throw captureFailed("no keyframe of \(id)'s webcam arrived")
        }
        let encoded: Result<[UInt8], Error> = await Task.detached(priority: .utility) {
            Result { try Self.decodeAndEncode(run, maxWidth: maxWidth, maxHeight: maxHeight) }
        }.value
        switch encoded {
        case .success(let jpeg): return Data(jpeg).base64EncodedString()
        case .failure(let error): throw captureFailed("\(error)")
        }
    }

    /// A positive pixel bound rounded down, nil for no bound; throws 3069 for NaN or ≤ 0.
    private func pixelBound(_ value: CGFloat?, _ name: String) throws -> Int? {
        guard let value, value.isFinite || value.isNaN else { return nil }
        guard value.isFinite, value >= 1 else { throw captureFailed("\(name) must be at least 1 pixel, got \(value)") }
        return Int(min(value.rounded(.down), 1_048_576))
    }

    /// A 3069 error, also reported to the room's `onError`.
    private func captureFailed(_ message: String) -> UnderstudyError {
        let error = UnderstudyError(code: 3069, message: "captureImage: \(message)")
        if let room { room.eventQueue.async { room.emit { $0.onError(error) } } }
        return error
    }

    /// Decodes from the keyframe to the newest frame in the run's codec (skipping frames that fail),
    /// scales, encodes.
    static func decodeAndEncode(_ run: CaptureRun, maxWidth: Int?, maxHeight: Int?) throws -> [UInt8] {
        let picture = try VideoDecoder(codec: run.codec).newestPicture(decoding: run.frames)
        let size = picture.fittedSize(maxWidth: maxWidth, maxHeight: maxHeight)
        return try JPEGEncoder().encode(picture.scaledDown(toWidth: size.width, height: size.height), quality: 85)
    }
}

import RTCWire

/// What every real-time video encoder of this module (``VPXEncoder``, ``AV1Encoder``,
/// ``H264Encoder``) keeps around its library: the size, frame rate and target bitrate it was opened
/// with (checked once, the same way for every codec), the frame counter that stamps 90 kHz
/// timestamps, the pending key-frame request, and the copy of a picture into the library's image.
/// Each encoder adds only its library's configuration, encode call and output.
struct RealtimeEncoderState {
    let codec: MediaCodec
    let width: Int
    let height: Int
    let fps: Int
    /// The rate-control target, bits per second.
    private(set) var targetBitrate: Int
    private var frameIndex: Int64 = 0
    private var keyframeRequested = false

    /// Checks the parameters every encoder takes: an even size up to 16383, 1…240 fps, a positive
    /// bitrate and key-frame interval, and `extra` (a library's own limit, named in `extraText`).
    /// - Throws: ``MediaError/invalidArgument(_:)`` naming the codec and what was refused.
    init(
        codec: MediaCodec, width: Int, height: Int, fps: Int, bitrate: Int, keyframeInterval: Int, extra: Bool = true,
        extraText: String = ""
    ) throws {
        let name = codec.rtpName
        guard width > 0, height > 0, width <= 16383, height <= 16383, width % 2 == 0, height % 2 == 0 else {
            throw MediaError.invalidArgument("\(name) size \(width)x\(height) (need even, 1…16383)")
        }
        guard fps > 0, fps <= 240, bitrate > 0, keyframeInterval > 0, extra else {
            throw MediaError.invalidArgument(
                "\(name) fps \(fps) bitrate \(bitrate) keyframe interval \(keyframeInterval)\(extraText)")
        }
        self.codec = codec
        self.width = width
        self.height = height
        self.fps = fps
        targetBitrate = bitrate
    }

    /// 90 kHz ticks per frame.
    var ticks: Int64 { Int64(90_000 / fps) }

    /// A library's rate field in kbit/s (at least 1).
    static func kilobits(_ bitrate: Int) -> UInt32 { UInt32(max(1, bitrate / 1000)) }

    /// Checks a new target before the library takes it; ``setTargetBitrate(_:)`` records it after.
    func checkBitrate(_ bitrate: Int) throws {
        guard bitrate > 0 else { throw MediaError.invalidArgument("\(codec.rtpName) bitrate \(bitrate)") }
    }

    mutating func setTargetBitrate(_ bitrate: Int) { targetBitrate = bitrate }

    mutating func forceKeyframe() { keyframeRequested = true }

    /// Starts encoding `picture`: checks it fits the encoder, and returns its presentation index
    /// and whether it must be a key frame (the request is taken).
    mutating func begin(_ picture: I420Image) throws -> (pts: Int64, keyframe: Bool) {
        guard picture.width == width, picture.height == height, picture.isConsistent else {
            throw MediaError.invalidArgument(
                "picture \(picture.width)x\(picture.height) for a \(width)x\(height) encoder")
        }
        defer {
            keyframeRequested = false
            frameIndex += 1
        }
        return (frameIndex, keyframeRequested)
    }

    /// The frame the library returned for presentation index `pts`, stamped in 90 kHz.
    func frame(_ data: [UInt8], pts: Int64, isKeyframe: Bool) -> EncodedFrame {
        EncodedFrame(
            codec: codec, data: data, timestamp: UInt32(truncatingIfNeeded: pts &* ticks), isKeyframe: isKeyframe,
            duration: UInt32(ticks))
    }

    /// Copies `picture`'s three planes into a library image whose plane pointers and strides are C
    /// arrays (imported as tuples of at least three): libvpx's, libaom's and libx264's alike.
    static func copy<Planes, Strides>(_ picture: I420Image, planes: Planes, strides: Strides) {
        precondition(MemoryLayout<Planes>.size >= 3 * MemoryLayout<UnsafeMutablePointer<UInt8>?>.stride)
        precondition(MemoryLayout<Strides>.size >= 3 * MemoryLayout<Int32>.stride)
        withUnsafeBytes(of: planes) { p in
            withUnsafeBytes(of: strides) { s in
                for plane in 0..<3 {
                    let dst = p.load(
                        fromByteOffset: plane * MemoryLayout<UnsafeMutablePointer<UInt8>?>.stride,
                        as: UnsafeMutablePointer<UInt8>?.self)
                    let stride = s.load(fromByteOffset: plane * MemoryLayout<Int32>.stride, as: Int32.self)
                    if let dst { picture.copyPlane(plane, to: dst, stride: Int(stride)) }
                }
            }
        }
    }
}

/// Errors from Opus packet inspection.
public enum OpusError: Error, Equatable, Sendable {
    /// A zero-length packet (RFC 6716 R1).
    case empty
    /// Code 1 with an even total length: the two frames cannot be equal in size (R3).
    case badCode1Length
    /// Code 2 without a complete first-frame length, or a length past the packet (R4).
    case badCode2Length
    /// Code 3 without its frame-count byte.
    case missingFrameCount
    /// Code 3 with a frame count of 0 (R5).
    case zeroFrames
    /// More than 120 ms of audio in one packet (R5).
    case tooLong(samples: Int)
}

/// The table-of-contents byte that starts every Opus packet (RFC 6716 §3.1).
public struct OpusTOC: Sendable, Equatable {
    /// Configuration number 0–31: mode, bandwidth and frame size.
    public var config: UInt8
    /// True for a stereo packet.
    public var stereo: Bool
    /// Frame-count code: 0 one frame, 1 two equal frames, 2 two frames, 3 an arbitrary number.
    public var frameCountCode: UInt8

    /// Decodes a TOC byte.
    public init(_ byte: UInt8) {
        config = byte >> 3
        stereo = byte & 0x04 != 0
        frameCountCode = byte & 0x03
    }

    /// Decodes the TOC byte of `packet`.
    public static func parse(_ packet: UnsafeRawBufferPointer) throws(OpusError) -> OpusTOC {
        guard let first = packet.first else { throw .empty }
        return OpusTOC(first)
    }

    /// The TOC byte.
    public var byte: UInt8 { (config & 0x1F) << 3 | (stereo ? 0x04 : 0) | (frameCountCode & 0x03) }

    /// Duration of one frame in 48 kHz samples (120 = 2.5 ms … 2880 = 60 ms).
    public var frameDuration: Int {
        let c = Int(config & 0x1F)
        switch c {
        case 0...11: return c % 4 == 3 ? 2880 : 480 << (c % 4)  // SILK: 10, 20, 40, 60 ms
        case 12...15: return c % 2 == 0 ? 480 : 960  // Hybrid: 10, 20 ms
        default: return 120 << (c % 4)  // CELT: 2.5, 5, 10, 20 ms
        }
    }

    /// Number of 48 kHz samples in `packet`, from its TOC and frame count (RFC 6716 §3.2).
    ///
    /// Applies the framing checks that need no frame-length parsing: R1, R3, the first length of R4,
    /// R5 and the 120 ms limit.
    public static func packetDuration(_ packet: UnsafeRawBufferPointer) throws(OpusError) -> Int {
        let toc = try parse(packet)
        let frames: Int
        switch toc.frameCountCode {
        case 0:
            frames = 1
        case 1:
            guard (packet.count - 1) % 2 == 0 else { throw .badCode1Length }
            frames = 2
        case 2:
            guard packet.count >= 2 else { throw .badCode2Length }
            var firstLength = Int(packet[1])
            var headerLength = 2
            if firstLength >= 252 {
                guard packet.count >= 3 else { throw .badCode2Length }
                firstLength += Int(packet[2]) * 4
                headerLength = 3
            }
            guard headerLength + firstLength <= packet.count else { throw .badCode2Length }
            frames = 2
        default:
            guard packet.count >= 2 else { throw .missingFrameCount }
            frames = Int(packet[1] & 0x3F)
            guard frames > 0 else { throw .zeroFrames }
        }
        let samples = frames * toc.frameDuration
        guard samples <= 5760 else { throw .tooLong(samples: samples) }
        return samples
    }
}

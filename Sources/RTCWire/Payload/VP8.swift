/// Errors from VP8 payload descriptor parsing and writing.
public enum VP8Error: Error, Equatable, Sendable {
    /// The payload ends inside the descriptor (or has no byte after it).
    case truncated
    /// The output buffer is too small.
    case bufferTooSmall
    /// A field is out of range (picture id > 0x7FFF, partition index > 7, TID > 3, KEYIDX > 31, or a
    /// 7-bit picture id > 127).
    case invalidField
    /// `maxPayloadSize` leaves no room for frame data after the descriptor.
    case payloadSizeTooSmall
}

/// The VP8 RTP payload descriptor (RFC 7741 §4.2).
///
/// ```
///  X R N S R PID(3)
///  I L T K RSV(4)        (when X)
///  M PictureID(7|15)     (when I)
///  TL0PICIDX             (when L)
///  TID(2) Y KEYIDX(5)    (when T or K)
/// ```
public struct VP8PayloadDescriptor: Sendable, Equatable {
    /// N: the frame can be discarded without affecting others.
    public var nonReference: Bool
    /// S: this packet starts a VP8 partition.
    public var startOfPartition: Bool
    /// PID: the partition index (0–7).
    public var partitionIndex: UInt8
    /// PictureID (I), 7 or 15 bits.
    public var pictureID: UInt16?
    /// True when the picture id uses the 15-bit form (M bit).
    public var pictureIDIs15Bit: Bool
    /// TL0PICIDX (L).
    public var tl0PicIdx: UInt8?
    /// TID (T), the temporal layer 0–3.
    public var tid: UInt8?
    /// Y: layer sync; meaningful only when ``tid`` is present.
    public var layerSync: Bool
    /// KEYIDX (K), 0–31.
    public var keyIdx: UInt8?

    /// Creates a descriptor. A picture id above 127 always uses the 15-bit form.
    public init(
        nonReference: Bool = false, startOfPartition: Bool, partitionIndex: UInt8 = 0,
        pictureID: UInt16? = nil,
        pictureIDIs15Bit: Bool = true, tl0PicIdx: UInt8? = nil, tid: UInt8? = nil,
        layerSync: Bool = false,
        keyIdx: UInt8? = nil
    ) {
        self.nonReference = nonReference
        self.startOfPartition = startOfPartition
        self.partitionIndex = partitionIndex
        self.pictureID = pictureID
        self.pictureIDIs15Bit = pictureIDIs15Bit || (pictureID ?? 0) > 0x7F
        self.tl0PicIdx = tl0PicIdx
        self.tid = tid
        self.layerSync = tid != nil && layerSync
        self.keyIdx = keyIdx
    }

    /// True when the extension byte (X) is needed.
    public var hasExtension: Bool {
        pictureID != nil || tl0PicIdx != nil || tid != nil || keyIdx != nil
    }

    /// Bytes ``write(into:)`` produces.
    public var encodedLength: Int {
        guard hasExtension else { return 1 }
        var n = 2
        if pictureID != nil { n += pictureIDIs15Bit ? 2 : 1 }
        if tl0PicIdx != nil { n += 1 }
        if tid != nil || keyIdx != nil { n += 1 }
        return n
    }

    /// Parses the descriptor at the start of an RTP payload and returns it with its length.
    ///
    /// Throws ``VP8Error/truncated`` when the payload ends inside the descriptor or carries no VP8
    /// data after it.
    public static func parse(
        _ payload: UnsafeRawBufferPointer
    ) throws(VP8Error) -> (VP8PayloadDescriptor, headerLength: Int) {
        guard payload.count >= 1 else { throw .truncated }
        let b0 = payload[0]
        var d = VP8PayloadDescriptor(
            nonReference: b0 & 0x20 != 0, startOfPartition: b0 & 0x10 != 0, partitionIndex: b0 & 0x07,
            pictureIDIs15Bit: false)
        var at = 1
        // The next descriptor byte; the payload must not end inside the descriptor.
        func next() throws(VP8Error) -> UInt8 {
            guard at < payload.count else { throw .truncated }
            at += 1
            return payload[at - 1]
        }
        if b0 & 0x80 != 0 {
            let x = try next()
            if x & 0x80 != 0 {
                let p0 = try next()
                if p0 & 0x80 != 0 {
                    d.pictureID = try UInt16(p0 & 0x7F) << 8 | UInt16(next())
                    d.pictureIDIs15Bit = true
                } else {
                    d.pictureID = UInt16(p0)
                }
            }
            if x & 0x40 != 0 { d.tl0PicIdx = try next() }
            if x & 0x30 != 0 {
                let t = try next()
                if x & 0x20 != 0 {
                    d.tid = t >> 6
                    d.layerSync = t & 0x20 != 0
                }
                if x & 0x10 != 0 { d.keyIdx = t & 0x1F }
            }
        }
        guard at < payload.count else { throw .truncated }
        return (d, at)
    }

    /// Writes the descriptor at the start of `buffer` and returns its length.
    public func write(into buffer: UnsafeMutableRawBufferPointer) throws(VP8Error) -> Int {
        guard partitionIndex <= 7, (tid ?? 0) <= 3, (keyIdx ?? 0) <= 31 else { throw .invalidField }
        if let pictureID {
            guard pictureID <= 0x7FFF, pictureIDIs15Bit || pictureID <= 0x7F else { throw .invalidField }
        }
        let n = encodedLength
        guard buffer.count >= n else { throw .bufferTooSmall }
        buffer[0] =
            (hasExtension ? 0x80 : 0) | (nonReference ? 0x20 : 0) | (startOfPartition ? 0x10 : 0)
            | partitionIndex
        guard hasExtension else { return 1 }
        buffer[1] =
            (pictureID != nil ? 0x80 : 0) | (tl0PicIdx != nil ? 0x40 : 0) | (tid != nil ? 0x20 : 0)
            | (keyIdx != nil ? 0x10 : 0)
        var at = 2
        if let pictureID {
            if pictureIDIs15Bit {
                buffer[at] = 0x80 | UInt8(truncatingIfNeeded: pictureID >> 8)
                buffer[at + 1] = UInt8(truncatingIfNeeded: pictureID)
                at += 2
            } else {
                buffer[at] = UInt8(truncatingIfNeeded: pictureID)
                at += 1
            }
        }
        if let tl0PicIdx {
            buffer[at] = tl0PicIdx
            at += 1
        }
        if tid != nil || keyIdx != nil {
            buffer[at] = (tid ?? 0) << 6 | (tid != nil && layerSync ? 0x20 : 0) | (keyIdx ?? 0)
            at += 1
        }
        return at
    }

    /// True when the VP8 payload header that follows a descriptor with S=1 and PID=0 marks a key
    /// frame (P bit, the lowest bit of the first byte, is 0). Only meaningful at the start of a frame.
    public static func isKeyframe(payloadAfterDescriptor payload: UnsafeRawBufferPointer) -> Bool {
        guard let first = payload.first else { return false }
        return first & 0x01 == 0
    }
}

/// Splits VP8 frames into RTP payloads (descriptor + chunk) of at most `maxPayloadSize` bytes.
///
/// Payload sizes are balanced so the last packet is not a tiny remainder. The packetizer owns one
/// scratch buffer that it grows to the largest payload seen and reuses, so a steady stream does not
/// allocate per packet or per frame.
public struct VP8Packetizer {
    private var scratch: [UInt8] = []

    public init() {}

    /// The picture id that follows `id` (15-bit wrap).
    @inlinable
    public static func nextPictureID(_ id: UInt16) -> UInt16 { (id &+ 1) & 0x7FFF }

    /// Number of packets `packetize` will emit for a frame of `frameLength` bytes.
    public static func packetCount(frameLength: Int, maxPayloadSize: Int, descriptorLength: Int)
        -> Int
    {
        let room = maxPayloadSize - descriptorLength
        guard room > 0, frameLength > 0 else { return 0 }
        return (frameLength + room - 1) / room
    }

    /// Packetizes one frame. `emit` receives each payload (valid only during the call) and whether it
    /// is the frame's last packet (set the RTP marker bit then). Every packet carries a 15-bit
    /// picture id; the first has S=1 and PID=0.
    ///
    /// - Returns: the number of packets emitted (0 for an empty frame).
    @discardableResult
    public mutating func packetize(
        frame: UnsafeRawBufferPointer, maxPayloadSize: Int, pictureID: UInt16, tl0PicIdx: UInt8? = nil,
        tid: UInt8? = nil, layerSync: Bool = false, nonReference: Bool = false,
        emit: (UnsafeRawBufferPointer, _ isLast: Bool) -> Void
    ) throws(VP8Error) -> Int {
        var descriptor = VP8PayloadDescriptor(
            nonReference: nonReference, startOfPartition: true, pictureID: pictureID & 0x7FFF,
            pictureIDIs15Bit: true,
            tl0PicIdx: tl0PicIdx, tid: tid, layerSync: layerSync)
        let descriptorLength = descriptor.encodedLength
        // The balanced split RTPSender uses (VP8PayloadFormat.Split), with this packetizer's descriptor.
        let split = VP8PayloadFormat.Split(
            frameLength: frame.count, maxPayloadSize: maxPayloadSize, descriptorLength: descriptorLength)
        let count = split.count
        guard frame.count > 0 else { return 0 }
        guard count > 0 else { throw .payloadSizeTooSmall }
        let largest = descriptorLength + split.chunk(0).count
        if scratch.count < largest { scratch = [UInt8](repeating: 0, count: largest) }
        for k in 0..<count {
            let chunk = split.chunk(k)
            descriptor.startOfPartition = k == 0
            var failure: VP8Error? = nil
            scratch.withUnsafeMutableBytes { out in
                do throws(VP8Error) {
                    let at = try descriptor.write(into: out)
                    UnsafeMutableRawBufferPointer(rebasing: out[at..<(at + chunk.count)])
                        .copyMemory(from: UnsafeRawBufferPointer(rebasing: frame[chunk]))
                    emit(UnsafeRawBufferPointer(rebasing: out[0..<(at + chunk.count)]), k == count - 1)
                } catch {
                    failure = error
                }
            }
            if let failure { throw failure }
        }
        return count
    }
}

/// Reads the picture size from a VP8 keyframe header (RFC 6386 §9.1).
public enum VP8KeyframeInfo {
    /// Returns the size coded in `frame` if it is a keyframe, or nil for a delta frame or bad data.
    public static func parse(_ frame: [UInt8]) -> (width: Int, height: Int)? {
        frame.withUnsafeBytes { parse(bytes: $0) }
    }

    /// Same as ``parse(_:)`` over raw bytes.
    public static func parse(bytes b: UnsafeRawBufferPointer) -> (width: Int, height: Int)? {
        // 3-byte frame tag (bit 0 clear = keyframe), start code 9d 01 2a, then 14-bit sizes + 2-bit scale.
        guard b.count >= 10, b[0] & 1 == 0, b[3] == 0x9d, b[4] == 0x01, b[5] == 0x2a else { return nil }
        let w = (Int(b[6]) | Int(b[7]) << 8) & 0x3fff
        let h = (Int(b[8]) | Int(b[9]) << 8) & 0x3fff
        guard w > 0, h > 0 else { return nil }
        return (w, h)
    }

    /// True when the VP8 frame tag marks a keyframe (no size validation).
    public static func isKeyframe(_ frame: [UInt8]) -> Bool {
        guard let first = frame.first else { return false }
        return first & 1 == 0
    }
}

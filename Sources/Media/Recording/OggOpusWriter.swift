public import RTCWire

/// Writes Opus packets to an Ogg Opus file (RFC 7845) without transcoding.
///
/// Pages hold up to `packetsPerPage` packets and are flushed to the kernel as each fills, so a
/// killed process leaves a playable file. Granule positions count 48 kHz samples including the
/// pre-skip. When `pts` shows a gap (lost packets), the gap is filled with empty Opus frames
/// (decoders conceal them) so audio stays in sync with wall time.
// Safe as used: one thread writes (its recording's loop); Sendable only to move it there.
public final class OggOpusWriter: @unchecked Sendable {
    /// Audio packets written (gap fillers excluded).
    public private(set) var packetsWritten = 0
    /// Empty packets inserted to cover gaps.
    public private(set) var gapPacketsInserted = 0
    /// Packets whose TOC byte was invalid (not written).
    public private(set) var invalidPackets = 0
    /// Channel count announced in OpusHead.
    public let channels: Int
    /// Pre-skip announced in OpusHead (48 kHz samples).
    public let preSkip: Int
    private let sink: FileSink
    private let serial: UInt32
    private let packetsPerPage: Int
    private var pageSequence: UInt32 = 0
    private var granule: Int64 = 0
    private var firstPts: Int64?
    private var lacing: [UInt8] = []
    private var body: [UInt8] = []
    private var packetsInPage = 0
    private var closed = false

    /// Bytes handed to the disk writer thread and not yet written (see ``DiskWriter``).
    public var backlogBytes: Int { sink.backlogBytes }
    /// The file (for the recorder's count of what reached it).
    var fileSink: FileSink { sink }
    /// Packets received (not gap fillers) in the page being built: handed to the file with it.
    private var pageFrames = RecordedFrames()

    /// Creates (truncates) `path` and writes the OpusHead and OpusTags pages.
    public init(
        path: String, channels: Int = 1, preSkip: Int = 312, packetsPerPage: Int = 10,
        serial: UInt32 = UInt32.random(in: 1...UInt32.max), writer: DiskWriter = .shared
    ) throws {
        guard channels == 1 || channels == 2 else { throw MediaError.invalidArgument("Ogg Opus channels \(channels)") }
        sink = try FileSink(path: path, writer: writer)
        self.channels = channels
        self.preSkip = max(0, min(preSkip, 65_535))
        self.serial = serial
        self.packetsPerPage = max(1, min(packetsPerPage, 50))
        lacing.reserveCapacity(255)
        body.reserveCapacity(8192)
        appendPacket(Self.opusHead(channels: channels, preSkip: self.preSkip))
        try writePage(granule: 0, flags: 0x02)
        var tags = Array("OpusTags".utf8)
        let vendor = Array("Understudy".utf8)
        tags.appendLE32(UInt32(vendor.count))
        tags.append(contentsOf: vendor)
        tags.appendLE32(0)  // no user comments
        appendPacket(tags)
        try writePage(granule: 0, flags: 0)
    }

    /// The 19-byte OpusHead identification header (RFC 7845 §5.1), also WebM's CodecPrivate.
    public static func opusHead(channels: Int, preSkip: Int, inputSampleRate: Int = 48_000) -> [UInt8] {
        var head = Array("OpusHead".utf8)
        head.append(1)  // version
        head.append(UInt8(clamping: channels))
        head.appendLE16(UInt16(clamping: preSkip))
        head.appendLE32(UInt32(clamping: inputSampleRate))
        head.appendLE16(0)  // output gain
        head.append(0)  // channel mapping family 0 (mono/stereo)
        return head
    }

    /// Writes one Opus packet. `pts` is nanoseconds since the recording's start; when given, a
    /// gap of two or more packets is filled with empty frames.
    public func write(_ frame: EncodedFrame, pts: Int64? = nil) throws {
        guard !closed else { throw MediaError.closed }
        guard frame.codec == .opus else {
            throw MediaError.invalidArgument("Ogg Opus holds Opus only, got \(frame.codec)")
        }
        guard let samples = OpusDecoder.sampleCount(of: frame.data) else {
            invalidPackets += 1
            return
        }
        if let pts {
            let start = firstPts ?? pts
            if firstPts == nil { firstPts = pts }
            let expected = (max(0, pts - start) * 48 + 500_000) / 1_000_000  // ns → 48 kHz samples
            let filler = [frame.data[0] & 0xFC]  // same config, one zero-length frame
            if let fillerSamples = OpusDecoder.sampleCount(of: filler) {
                // Fill only real gaps (two packets or more), not jitter; never more than 30 s at once.
                let gap = expected - granule
                if gap >= Int64(2 * fillerSamples) {
                    let count = min(
                        (gap + Int64(fillerSamples / 2)) / Int64(fillerSamples), Int64(30 * 48_000 / fillerSamples))
                    for _ in 0..<count { try addPacket(filler, samples: fillerSamples) }
                    gapPacketsInserted += Int(count)
                }
            }
        }
        try addPacket(frame.data, samples: samples)
        pageFrames.add(frame)
        packetsWritten += 1
    }

    private func addPacket(_ packet: [UInt8], samples: Int) throws {
        let segments = packet.count / 255 + 1
        if packetsInPage >= packetsPerPage || lacing.count + segments > 255 {
            try writePage(granule: granule, flags: 0)
        }
        appendPacket(packet)
        granule += Int64(samples)
    }

    private func appendPacket(_ packet: [UInt8]) {
        var remaining = packet.count
        while remaining >= 255 {
            lacing.append(255)
            remaining -= 255
        }
        lacing.append(UInt8(remaining))
        body.append(contentsOf: packet)
        packetsInPage += 1
    }

    private func writePage(granule: Int64, flags: UInt8) throws {
        let start = sink.buffer.count
        sink.buffer.append(contentsOf: [0x4F, 0x67, 0x67, 0x53, 0, flags])  // "OggS", version 0
        sink.buffer.appendLE64(UInt64(bitPattern: granule))
        sink.buffer.appendLE32(serial)
        sink.buffer.appendLE32(pageSequence)
        sink.buffer.appendLE32(0)  // CRC placeholder
        sink.buffer.append(UInt8(lacing.count))
        sink.buffer.append(contentsOf: lacing)
        sink.buffer.append(contentsOf: body)
        sink.pendingFrames += pageFrames
        pageFrames = RecordedFrames()
        let crc = CRC32MSB.update(0, sink.buffer[start...])
        sink.buffer[start + 22] = UInt8(crc & 0xFF)
        sink.buffer[start + 23] = UInt8((crc >> 8) & 0xFF)
        sink.buffer[start + 24] = UInt8((crc >> 16) & 0xFF)
        sink.buffer[start + 25] = UInt8(crc >> 24)
        pageSequence &+= 1
        lacing.removeAll(keepingCapacity: true)
        body.removeAll(keepingCapacity: true)
        packetsInPage = 0
        try sink.flush()
    }

    /// Writes the last page with the end-of-stream flag and closes the file. Safe to call twice.
    public func close() throws {
        guard !closed else { return }
        closed = true
        try writePage(granule: granule, flags: 0x04)
        try sink.close()
    }
}

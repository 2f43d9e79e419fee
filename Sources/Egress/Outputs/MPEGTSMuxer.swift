import Media

/// An MPEG-2 transport stream (ISO/IEC 13818-1) of one H.264 and one AAC track: what an HLS output with
/// `.ts` segments writes (``HLSOutput/Options/SegmentFormat/ts``).
///
/// One program (number 1, its PMT on PID 0x1000), video on PID 0x100 (stream type 0x1B, with the PCR),
/// audio on PID 0x101 (stream type 0x0F, AAC in ADTS). Each video access unit is one PES packet (an
/// access unit delimiter put first when the encoder wrote none, as TS requires), each AAC frame one PES
/// packet with its ADTS header. Every packet with a payload advances its PID's continuity counter. The
/// PCR rides in the adaptation field of each video PES's first packet, 100 ms before its PTS; timestamps
/// start at 1 s (90 kHz) so that the PCR never goes below zero. There are no B-frames (the composite's
/// encoder makes none), so the DTS is the PTS and only the PTS is written.
///
/// Packets are appended to ``bytes`` (its capacity kept), which the caller drains with ``drain(_:)``:
/// no allocation per frame once the buffer has grown.
public struct MPEGTSMuxer: Sendable {
    /// A transport stream packet's size.
    public static let packetSize = 188
    /// The PMT's PID.
    public static let pmtPID: UInt16 = 0x1000
    /// The video PID (it carries the PCR).
    public static let videoPID: UInt16 = 0x100
    /// The audio PID.
    public static let audioPID: UInt16 = 0x101
    /// 90 kHz ticks added to every timestamp (1 s): the PCR, 100 ms before each video PTS, stays positive.
    public static let timestampOffset: Int64 = 90_000
    /// How far the PCR runs ahead of the video PTS (the decoder's buffering), in 90 kHz ticks.
    static let pcrLead: Int64 = 9_000

    /// Packets written and not drained yet.
    public private(set) var bytes: [UInt8] = []
    private var patCounter: UInt8 = 0
    private var pmtCounter: UInt8 = 0
    private var videoCounter: UInt8 = 0
    private var audioCounter: UInt8 = 0
    /// The ADTS header's fixed part (profile, rate, channels), from the AudioSpecificConfig.
    private let adtsProfile: UInt8
    private let adtsRateIndex: UInt8
    private let adtsChannels: UInt8

    /// A muxer whose AAC frames are described by `audioSpecificConfig` (ISO/IEC 14496-3: 5 bits of object
    /// type, 4 of the sampling rate's index, 4 of the channel configuration).
    /// - Throws: ``MediaError/invalidArgument(_:)`` for a config ADTS cannot describe (an object type
    ///   above 4, an explicit rate, no channel configuration).
    public init(audioSpecificConfig asc: [UInt8]) throws {
        guard asc.count >= 2 else { throw MediaError.invalidArgument("AAC config of \(asc.count) bytes") }
        let objectType = asc[0] >> 3
        let rateIndex = ((asc[0] & 0x07) << 1) | (asc[1] >> 7)
        let channels = (asc[1] >> 3) & 0x0F
        guard (1...4).contains(objectType), rateIndex < 13, (1...7).contains(channels) else {
            throw MediaError.invalidArgument(
                "AAC config (object type \(objectType), rate index \(rateIndex), channels \(channels)) is not ADTS's")
        }
        adtsProfile = objectType - 1
        adtsRateIndex = rateIndex
        adtsChannels = channels
        bytes.reserveCapacity(64 * 1024)
    }

    /// Hands the packets written so far to `body` and forgets them (the capacity stays).
    public mutating func drain(_ body: (UnsafeRawBufferPointer) throws -> Void) rethrows {
        defer { bytes.removeAll(keepingCapacity: true) }
        try bytes.withUnsafeBytes { try body($0) }
    }

    // MARK: - PSI

    /// The program association table's section (pointer field excluded): program 1 → PMT PID 0x1000.
    public static let patSection: [UInt8] = withCRC([
        0x00, 0xB0, 0x0D, 0x00, 0x01, 0xC1, 0x00, 0x00,
        0x00, 0x01, 0xE0 | UInt8(pmtPID >> 8), UInt8(pmtPID & 0xFF),
    ])

    /// The program map table's section: PCR on the video PID, H.264 (0x1B) and AAC in ADTS (0x0F).
    public static let pmtSection: [UInt8] = withCRC([
        0x02, 0xB0, 0x17, 0x00, 0x01, 0xC1, 0x00, 0x00,
        0xE0 | UInt8(videoPID >> 8), UInt8(videoPID & 0xFF), 0xF0, 0x00,
        0x1B, 0xE0 | UInt8(videoPID >> 8), UInt8(videoPID & 0xFF), 0xF0, 0x00,
        0x0F, 0xE0 | UInt8(audioPID >> 8), UInt8(audioPID & 0xFF), 0xF0, 0x00,
    ])

    /// `section` followed by its CRC_32 (MPEG-2's: initial value 0xFFFFFFFF, big-endian).
    static func withCRC(_ section: [UInt8]) -> [UInt8] {
        let crc = CRC32MSB.update(0xFFFF_FFFF, section)
        return section + [UInt8(crc >> 24), UInt8((crc >> 16) & 0xFF), UInt8((crc >> 8) & 0xFF), UInt8(crc & 0xFF)]
    }

    /// Writes the PAT and the PMT (at the start of every segment, so each one plays alone).
    public mutating func writeTables() {
        patCounter = writeSection(Self.patSection, pid: 0, counter: patCounter)
        pmtCounter = writeSection(Self.pmtSection, pid: Self.pmtPID, counter: pmtCounter)
    }

    /// Writes `section` in one packet; returns the PID's next continuity counter.
    private mutating func writeSection(_ section: [UInt8], pid: UInt16, counter: UInt8) -> UInt8 {
        var counter = counter
        appendHeader(pid: pid, start: true, adaptation: false, counter: &counter)
        bytes.append(0)  // pointer_field
        bytes.append(contentsOf: section)
        bytes.append(contentsOf: repeatElement(0xFF, count: Self.packetSize - 5 - section.count))
        return counter
    }

    // MARK: - PES

    /// Writes one H.264 access unit (Annex B) presented at `ptsMicros`; `keyframe` marks it a random access point.
    public mutating func writeVideo(_ accessUnit: [UInt8], ptsMicros: Int64, keyframe: Bool) {
        let pts = Self.ticks(ptsMicros)
        // An access unit delimiter (type 9, any slice type) first, unless there is one.
        let hasDelimiter = Self.firstNALType(accessUnit) == 9
        let prefix: [UInt8] = hasDelimiter ? [] : [0, 0, 0, 1, 0x09, 0xF0]
        accessUnit.withUnsafeBytes { au in
            prefix.withUnsafeBytes { pre in
                videoCounter = writePES(
                    pid: Self.videoPID, streamId: 0xE0, pts: pts, parts: (pre, au), bounded: false,
                    pcr: max(0, pts - Self.pcrLead), randomAccess: keyframe, counter: videoCounter)
            }
        }
    }

    /// Writes one raw AAC frame (no ADTS header: it is added here) presented at `ptsMicros`.
    public mutating func writeAudio(_ frame: UnsafeRawBufferPointer, ptsMicros: Int64) {
        let length = frame.count + 7
        let header: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = (
            0xFF, 0xF1, (adtsProfile << 6) | (adtsRateIndex << 2) | (adtsChannels >> 2),
            ((adtsChannels & 3) << 6) | UInt8((length >> 11) & 0x03), UInt8((length >> 3) & 0xFF),
            UInt8((length & 0x07) << 5) | 0x1F, 0xFC
        )
        withUnsafeBytes(of: header) { adts in
            audioCounter = writePES(
                pid: Self.audioPID, streamId: 0xC0, pts: Self.ticks(ptsMicros), parts: (adts, frame), bounded: true,
                pcr: nil, randomAccess: false, counter: audioCounter)
        }
    }

    /// 90 kHz ticks of `micros`, offset by ``timestampOffset``, on 33 bits.
    static func ticks(_ micros: Int64) -> Int64 { (timestampOffset + micros * 9 / 100) & 0x1_FFFF_FFFF }

    /// The type of the first NAL unit of an Annex B access unit (nil when none).
    static func firstNALType(_ data: [UInt8]) -> UInt8? {
        var i = 0
        while i + 3 < data.count {
            if data[i] == 0, data[i + 1] == 0 {
                if data[i + 2] == 1 { return data[i + 3] & 0x1F }
                if data[i + 2] == 0, i + 4 < data.count, data[i + 3] == 1 { return data[i + 4] & 0x1F }
            }
            if data[i] != 0 { return nil }
            i += 1
        }
        return nil
    }

    /// The five bytes of a PTS (`'0010'` and the 33 bits with their marker bits).
    static func ptsBytes(_ pts: Int64) -> (UInt8, UInt8, UInt8, UInt8, UInt8) {
        (
            0x20 | UInt8((pts >> 29) & 0x0E) | 1, UInt8((pts >> 22) & 0xFF), UInt8((pts >> 14) & 0xFE) | 1,
            UInt8((pts >> 7) & 0xFF), UInt8((pts << 1) & 0xFE) | 1
        )
    }

    /// One PES packet of `parts.0` then `parts.1`, cut into transport packets; the first carries the PCR
    /// and the random access flag when given, the last is filled up with adaptation field stuffing.
    /// Returns the PID's next continuity counter.
    private mutating func writePES(
        pid: UInt16, streamId: UInt8, pts: Int64, parts: (UnsafeRawBufferPointer, UnsafeRawBufferPointer),
        bounded: Bool, pcr: Int64?, randomAccess: Bool, counter: UInt8
    ) -> UInt8 {
        var counter = counter
        let dataCount = parts.0.count + parts.1.count
        // PES_packet_length counts what follows it: 3 flag bytes, 5 of PTS, the data (0: unbounded, video only).
        let pesLength = bounded && dataCount + 8 <= 0xFFFF ? dataCount + 8 : 0
        let p = Self.ptsBytes(pts)
        let header: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (
                0, 0, 1, streamId, UInt8(pesLength >> 8), UInt8(pesLength & 0xFF), 0x80, 0x80, 5,
                p.0, p.1, p.2, p.3, p.4
            )
        withUnsafeBytes(of: header) { head in
            let total = head.count + dataCount
            var sent = 0
            var first = true
            while sent < total {
                // The adaptation field's content on the first packet: flags, and the PCR's 6 bytes.
                let fieldContent = first && (pcr != nil || randomAccess) ? 1 + (pcr == nil ? 0 : 6) : 0
                var field = fieldContent == 0 ? 0 : 1 + fieldContent
                let remaining = total - sent
                if remaining < 184 - field { field = 184 - remaining }
                let start = bytes.count
                appendHeader(pid: pid, start: first, adaptation: field > 0, counter: &counter)
                if field > 0 {
                    bytes.append(UInt8(field - 1))
                    if field > 1 {
                        var flags: UInt8 = 0
                        if first && randomAccess { flags |= 0x40 }
                        if first, pcr != nil { flags |= 0x10 }
                        bytes.append(flags)
                        if first, let pcr {
                            // 33 bits of base, 6 reserved, 9 of extension (0).
                            bytes.append(UInt8((pcr >> 25) & 0xFF))
                            bytes.append(UInt8((pcr >> 17) & 0xFF))
                            bytes.append(UInt8((pcr >> 9) & 0xFF))
                            bytes.append(UInt8((pcr >> 1) & 0xFF))
                            bytes.append(UInt8((pcr & 1) << 7) | 0x7E)
                            bytes.append(0)
                        }
                        bytes.append(contentsOf: repeatElement(0xFF, count: start + 4 + field - bytes.count))
                    }
                }
                // The payload: the rest of the header, then the two parts, in order.
                var left = Self.packetSize - (bytes.count - start)
                var at = sent
                Self.copy(head, base: 0, at: &at, left: &left, into: &bytes)
                Self.copy(parts.0, base: head.count, at: &at, left: &left, into: &bytes)
                Self.copy(parts.1, base: head.count + parts.0.count, at: &at, left: &left, into: &bytes)
                sent = at
                first = false
            }
        }
        return counter
    }

    /// Copies what of `piece` (at `base` in the PES) lies at `at`, up to `left` bytes.
    private static func copy(
        _ piece: UnsafeRawBufferPointer, base: Int, at: inout Int, left: inout Int, into bytes: inout [UInt8]
    ) {
        let from = at - base
        guard left > 0, from >= 0, from < piece.count else { return }
        let n = min(left, piece.count - from)
        bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: piece[from..<(from + n)]))
        at += n
        left -= n
    }

    /// The 4-byte packet header; the continuity counter advances (every packet here carries a payload).
    private mutating func appendHeader(pid: UInt16, start: Bool, adaptation: Bool, counter: inout UInt8) {
        bytes.append(0x47)
        bytes.append((start ? 0x40 : 0) | UInt8(pid >> 8))
        bytes.append(UInt8(pid & 0xFF))
        bytes.append((adaptation ? 0x30 : 0x10) | counter)
        counter = (counter + 1) & 0x0F
    }
}

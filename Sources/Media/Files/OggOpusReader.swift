public import RTCWire

/// Reads Opus packets from an Ogg Opus file (RFC 7845), checking every page's CRC.
public struct OggOpusReader: Sendable {
    /// Channel count from OpusHead.
    public let channels: Int
    /// Samples (48 kHz) to discard at the start, from OpusHead.
    public let preSkip: Int
    /// The original input sample rate recorded in OpusHead (informational).
    public let inputSampleRate: Int
    /// Audio packets in file order (OpusHead and OpusTags excluded).
    public let packets: [[UInt8]]
    /// True when the file ended inside a page or packet (e.g. a killed recording).
    public let truncated: Bool

    /// Parses `path`. Throws ``MediaError/malformedFile(path:reason:)`` for a non-Ogg or non-Opus file.
    public init(path: String) throws {
        try self.init(bytes: readWholeFile(path), path: path)
    }

    /// Parses an Ogg Opus file already in memory; `path` is only used in error messages.
    public init(bytes b: [UInt8], path: String = "<memory>") throws {
        func bad(_ reason: String) -> MediaError { .malformedFile(path: path, reason: reason) }
        guard b.hasBytes(0, Array("OggS".utf8)) else { throw bad("not an Ogg file (no OggS capture pattern)") }
        var packets: [[UInt8]] = []
        var partial: [UInt8] = []
        var serial: UInt32? = nil
        var at = 0
        var truncated = false
        while at < b.count {
            guard b.hasBytes(at, Array("OggS".utf8)) else { throw bad("lost page sync at byte \(at)") }
            guard at + 27 <= b.count else {
                truncated = true
                break
            }
            guard b[at + 4] == 0 else { throw bad("unsupported Ogg version \(b[at + 4]) at byte \(at)") }
            let pageSerial = b.le32(at + 14) ?? 0
            let storedCRC = b.le32(at + 22) ?? 0
            let segmentCount = Int(b[at + 26])
            let lacingStart = at + 27
            guard lacingStart + segmentCount <= b.count else {
                truncated = true
                break
            }
            var bodyLength = 0
            for i in 0..<segmentCount { bodyLength += Int(b[lacingStart + i]) }
            let bodyStart = lacingStart + segmentCount
            guard bodyStart + bodyLength <= b.count else {
                truncated = true
                break
            }
            let pageEnd = bodyStart + bodyLength
            var crc = CRC32MSB.update(0, b[at..<(at + 22)])
            crc = CRC32MSB.update(crc, [0, 0, 0, 0][...])
            crc = CRC32MSB.update(crc, b[(at + 26)..<pageEnd])
            guard crc == storedCRC else { throw bad("Ogg page CRC mismatch at byte \(at)") }
            if serial == nil { serial = pageSerial }
            if pageSerial == serial {
                var pos = bodyStart
                for i in 0..<segmentCount {
                    let len = Int(b[lacingStart + i])
                    partial.append(contentsOf: b[pos..<(pos + len)])
                    pos += len
                    if len < 255 {
                        packets.append(partial)
                        partial.removeAll(keepingCapacity: true)
                    }
                }
            }
            at = pageEnd
        }
        if !partial.isEmpty { truncated = true }
        guard let head = packets.first, head.count >= 19, head.hasBytes(0, Array("OpusHead".utf8)) else {
            throw bad("first Ogg packet is not OpusHead (not an Opus stream)")
        }
        guard head[8] & 0xF0 == 0 else { throw bad("unsupported OpusHead version \(head[8])") }
        let ch = Int(head[9])
        guard ch == 1 || ch == 2 else { throw bad("unsupported channel count \(ch)") }
        channels = ch
        preSkip = Int(head.le16(10) ?? 0)
        inputSampleRate = Int(head.le32(12) ?? 0)
        guard packets.count >= 2, packets[1].hasBytes(0, Array("OpusTags".utf8)) else {
            throw bad("second Ogg packet is not OpusTags")
        }
        self.packets = Array(packets.dropFirst(2).filter { !$0.isEmpty })
        self.truncated = truncated
    }

    /// The packets as ``EncodedFrame``s with 48 kHz timestamps (first at 0) and durations from
    /// each packet's TOC. Packets whose TOC is invalid are skipped.
    public func encodedFrames() -> [EncodedFrame] {
        var out: [EncodedFrame] = []
        out.reserveCapacity(packets.count)
        var t = 0
        for p in packets {
            // The TOC gives the duration without libopus, so the readers compile alone (fuzzing).
            guard let samples = p.withUnsafeBytes({ try? OpusTOC.packetDuration($0) }) else { continue }
            out.append(
                EncodedFrame(
                    codec: .opus, data: p, timestamp: UInt32(truncatingIfNeeded: t),
                    isKeyframe: true, duration: UInt32(samples)))
            t += samples
        }
        return out
    }
}

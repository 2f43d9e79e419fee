/// One binary message of the per-speaker PCM stream (`understudy join --transcribe`): a header and
/// mono PCM s16le samples. Every integer is little-endian (docs/protocol.md, "Per-speaker PCM"):
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 4 | magic `UPCM` |
/// | 4 | 1 | version (1) |
/// | 5 | 1 | N, the participant id's length in bytes (1–255) |
/// | 6 | N | participant id, UTF-8 |
/// | 6+N | 8 | timestamp of the first sample, ms on the room timeline (u64) |
/// | 14+N | 4 | sample rate in Hz (u32) |
/// | 18+N | 4 | sample count (u32) |
/// | 22+N | 2·count | samples, s16le mono |
public struct SpeakerPCMFrame: Sendable, Equatable {
    /// The first four bytes of every frame.
    public static let magic: [UInt8] = Array("UPCM".utf8)
    /// The header version this code writes and reads.
    public static let version: UInt8 = 1

    public var participantId: String
    /// Milliseconds since the room timeline's origin (the `start` event's `startedAt`).
    public var timestampMs: UInt64
    public var sampleRate: UInt32
    public var samples: [Int16]

    public init(participantId: String, timestampMs: UInt64, sampleRate: UInt32, samples: [Int16]) {
        self.participantId = participantId
        self.timestampMs = timestampMs
        self.sampleRate = sampleRate
        self.samples = samples
    }

    /// Why bytes are not a frame.
    public enum DecodeError: Error, Equatable, CustomStringConvertible {
        case tooShort
        case badMagic
        case unsupportedVersion(UInt8)
        case badParticipantId
        case lengthMismatch(expected: Int, got: Int)

        public var description: String {
            switch self {
            case .tooShort: "PCM frame shorter than its header"
            case .badMagic: "PCM frame does not start with UPCM"
            case .unsupportedVersion(let v): "PCM frame version \(v) (1 expected)"
            case .badParticipantId: "PCM frame participant id is empty or not UTF-8"
            case .lengthMismatch(let e, let g): "PCM frame should be \(e) bytes, is \(g)"
            }
        }
    }

    /// The frame's bytes. A participant id longer than 255 bytes is cut at a character boundary.
    public func encoded() -> [UInt8] {
        var id = Array(participantId.utf8)
        if id.count > 255 {
            var cut = String(decoding: id.prefix(255), as: UTF8.self)
            while cut.utf8.count > 255 || cut.hasSuffix("\u{FFFD}") { cut.removeLast() }
            id = Array(cut.utf8)
        }
        var out = [UInt8]()
        out.reserveCapacity(22 + id.count + 2 * samples.count)
        out.append(contentsOf: Self.magic)
        out.append(Self.version)
        out.append(UInt8(id.count))
        out.append(contentsOf: id)
        out.appendLE64(timestampMs)
        out.appendLE32(sampleRate)
        out.appendLE32(UInt32(samples.count))
        for s in samples {
            let u = UInt16(bitPattern: s)
            out.append(UInt8(u & 0xFF))
            out.append(UInt8(u >> 8))
        }
        return out
    }

    /// Reads a frame written by ``encoded()``.
    public init(decoding bytes: [UInt8]) throws(DecodeError) {
        guard bytes.count >= 6 else { throw .tooShort }
        guard Array(bytes[0..<4]) == Self.magic else { throw .badMagic }
        guard bytes[4] == Self.version else { throw .unsupportedVersion(bytes[4]) }
        let n = Int(bytes[5])
        let header = 22 + n
        guard bytes.count >= header else { throw .tooShort }
        guard n > 0, let id = String(validating: bytes[6..<(6 + n)], as: UTF8.self) else { throw .badParticipantId }
        func le(_ at: Int, _ size: Int) -> UInt64 {
            var v: UInt64 = 0
            for i in 0..<size { v |= UInt64(bytes[at + i]) << (8 * UInt64(i)) }
            return v
        }
        let count = Int(le(18 + n, 4))
        guard bytes.count == header + 2 * count else {
            throw .lengthMismatch(expected: header + 2 * count, got: bytes.count)
        }
        participantId = id
        timestampMs = le(6 + n, 8)
        sampleRate = UInt32(le(14 + n, 4))
        var pcm = [Int16](repeating: 0, count: count)
        for i in 0..<count {
            pcm[i] = Int16(bitPattern: UInt16(bytes[header + 2 * i]) | UInt16(bytes[header + 2 * i + 1]) << 8)
        }
        samples = pcm
    }
}

/// Who is speaking, from each 20 ms frame's level: speaking starts at a frame at or above
/// ``onDBFS`` and ends after ``hangover`` of frames below ``offDBFS`` (or of no frames at all).
/// Positions are 48 kHz samples on the room timeline.
public struct SpeakerActivity: Sendable {
    /// A frame this loud starts speech (−40 dBFS: quiet speech; a silent or muted mic is far below).
    public static let onDBFS: Float = -40
    /// Frames quieter than this count towards the end of speech.
    public static let offDBFS: Float = -45
    /// Quiet time that ends speech: 400 ms (pauses between words do not split a turn).
    public static let hangover: Int64 = 400 * 48

    /// Whether the participant is speaking.
    public private(set) var speaking = false
    /// Where the current turn started.
    public private(set) var startedAt: Int64 = 0
    /// The end of the last loud frame.
    private var lastLoud: Int64 = 0

    public init() {}

    /// A change of state.
    public enum Change: Equatable, Sendable {
        case started(at: Int64)
        case stopped(start: Int64, end: Int64)
    }

    /// One frame at `position`, `samples` long, at `level` dBFS.
    public mutating func frame(at position: Int64, samples: Int, level: Float) -> Change? {
        let end = position + Int64(samples)
        if level >= Self.onDBFS || (speaking && level >= Self.offDBFS) {
            lastLoud = end
            if !speaking {
                speaking = true
                startedAt = position
                return .started(at: position)
            }
            return nil
        }
        return idle(until: end)
    }

    /// No loud frame up to `position` (time passing with no frames: a mute, a leave).
    public mutating func idle(until position: Int64) -> Change? {
        guard speaking, position - lastLoud >= Self.hangover else { return nil }
        speaking = false
        return .stopped(start: startedAt, end: lastLoud)
    }

    /// Ends a turn in progress (the track ended, the recording stops).
    public mutating func finish() -> Change? {
        guard speaking else { return nil }
        speaking = false
        return .stopped(start: startedAt, end: lastLoud)
    }
}

internal import RTCWire

/// Why an MP4 file could not be read.
public enum MP4ReaderError: Error, Equatable, CustomStringConvertible {
    /// The file could not be opened or read; `errno` is the OS error.
    case cannotOpen(path: String, errno: Int32)
    /// The input does not start with an `ftyp` box.
    case notMP4
    /// No `moov` box (the track list) before the input ends.
    case missingMovie
    /// A box at `offset` is malformed (a size below its header, a field past its end).
    case malformedBox(offset: Int, type: String, reason: String)

    public var description: String {
        switch self {
        case .cannotOpen(let path, let errno): return "cannot open \(path): errno \(errno)"
        case .notMP4: return "not an MP4 file (no ftyp box first)"
        case .missingMovie: return "no moov box (the file ends before its track list)"
        case .malformedBox(let offset, let type, let reason):
            return "malformed '\(type)' box at byte \(offset): \(reason)"
        }
    }
}

/// Reads the tracks and samples of an ISO BMFF (MP4) file: fragmented files from ``MP4Writer``
/// (`moov` with `mvex`, then `moof`+`mdat` pairs) and plain ones from ffmpeg (sample tables in
/// `moov`), in the shapes ``WebMReader`` gives, so one analysis reads both containers.
///
/// Tracks carry their sample entry's FourCC as ``WebMReader/Track/codecID`` (`avc1`, `vp09`,
/// `av01`, `Opus`) and its configuration as ``WebMReader/Track/codecPrivate``: the `avcC` for
/// H.264 (samples stay length-prefixed, as in Matroska: see ``AVCConfiguration``), the `av1C`,
/// and for Opus an OpusHead made from `dOps`. Samples come in decode order, timed by decode time
/// plus composition offset. A file cut short (a killed recorder) reads up to the last sample whose
/// bytes are all there and sets ``isTruncated``.
public struct MP4Reader: Sendable {
    /// Tracks in file order (track numbers are the `tkhd` track IDs).
    public let tracks: [WebMReader.Track]
    /// True when the input ended inside a box or a sample.
    public let isTruncated: Bool
    private let samples: [Int: [WebMReader.Frame]]

    /// Reads the file at `path`.
    public init(path: String) throws(MP4ReaderError) {
        try self.init(bytes: readWholeFile(path) { MP4ReaderError.cannotOpen(path: path, errno: $0) })
    }

    /// Parses a whole file held in memory.
    public init(bytes: [UInt8]) throws(MP4ReaderError) {
        var parser = Parser(bytes: bytes)
        try parser.run()
        tracks = parser.tracks.map(\.track)
        samples = parser.samples
        isTruncated = parser.truncated
    }

    /// Samples of track `number`, in decode order.
    public func frames(track number: Int) -> [WebMReader.Frame] { samples[number] ?? [] }
}

// MARK: - Parser

private struct Box {
    var type: String
    /// Offset of the box's first byte.
    var start: Int
    /// Offset of the payload (after size, type and a large size).
    var payload: Int
    /// Offset just past the box.
    var end: Int
}

private struct TrackInfo {
    var track: WebMReader.Track
    var timescale: Int64 = 0
    // Sample tables of a plain (not fragmented) file.
    var durations: [(count: Int, delta: Int64)] = []
    var offsets: [(count: Int, offset: Int64)] = []
    var sizes: [Int] = []
    var chunkRuns: [(firstChunk: Int, samplesPerChunk: Int)] = []
    var chunkOffsets: [Int] = []
    var syncSamples: Set<Int>?
    // `trex` defaults for fragments.
    var defaultDuration: Int64 = 0
    var defaultSize = 0
    var defaultFlags: UInt32 = 0
    /// Decode time of the next fragment sample (when a `traf` has no `tfdt`).
    var nextDecodeTime: Int64 = 0
}

private struct Parser {
    let bytes: [UInt8]
    var tracks: [TrackInfo] = []
    var samples: [Int: [WebMReader.Frame]] = [:]
    var truncated = false

    init(bytes: [UInt8]) { self.bytes = bytes }

    mutating func run() throws(MP4ReaderError) {
        let top = try children(0, bytes.count)
        guard top.first?.type == "ftyp" else { throw .notMP4 }
        guard let moov = top.first(where: { $0.type == "moov" }) else { throw .missingMovie }
        for trak in try children(moov.payload, moov.end) where trak.type == "trak" {
            if let info = try readTrack(trak) { tracks.append(info) }
        }
        for mvex in try children(moov.payload, moov.end) where mvex.type == "mvex" {
            for trex in try children(mvex.payload, mvex.end) where trex.type == "trex" {
                try field(trex, 4 + 20)
                let id = Int(u32(trex.payload + 4))
                guard let i = tracks.firstIndex(where: { $0.track.number == id }) else { continue }
                tracks[i].defaultDuration = Int64(u32(trex.payload + 12))
                tracks[i].defaultSize = Int(u32(trex.payload + 16))
                tracks[i].defaultFlags = u32(trex.payload + 20)
            }
        }
        for i in tracks.indices { samples[tracks[i].track.number] = tableSamples(tracks[i]) }
        for moof in top where moof.type == "moof" { try readFragment(moof) }
    }

    // MARK: Boxes

    /// The boxes between `from` and `to`; a box that overruns `to` ends the list (a cut file).
    mutating func children(_ from: Int, _ to: Int) throws(MP4ReaderError) -> [Box] {
        var out: [Box] = []
        var at = from
        while at + 8 <= to {
            var size = Int(u32(at))
            let type = String(decoding: bytes[(at + 4)..<(at + 8)], as: UTF8.self)
            var header = 8
            if size == 1 {
                guard at + 16 <= to else {
                    truncated = true
                    break
                }
                let large = u64(at + 8)
                guard large <= UInt64(Int.max) else { throw .malformedBox(offset: at, type: type, reason: "size") }
                size = Int(large)
                header = 16
            } else if size == 0 {
                size = to - at
            }
            guard size >= header else { throw .malformedBox(offset: at, type: type, reason: "size \(size)") }
            guard size <= to - at else {
                truncated = true
                // A cut `mdat` still holds whole samples: keep it, cut short.
                if type == "mdat" { out.append(Box(type: type, start: at, payload: at + header, end: to)) }
                break
            }
            out.append(Box(type: type, start: at, payload: at + header, end: at + size))
            at += size
        }
        if at < to && at + 8 > to { truncated = true }
        return out
    }

    func child(_ box: Box, _ type: String) throws(MP4ReaderError) -> Box? {
        var copy = self
        return try copy.children(box.payload, box.end).first { $0.type == type }
    }

    func field(_ box: Box, _ length: Int) throws(MP4ReaderError) {
        guard box.payload + length <= box.end else {
            throw .malformedBox(offset: box.start, type: box.type, reason: "\(length) bytes of fields needed")
        }
    }

    func u16(_ at: Int) -> UInt16 { UInt16(bytes[at]) << 8 | UInt16(bytes[at + 1]) }
    func u32(_ at: Int) -> UInt32 {
        UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8 | UInt32(bytes[at + 3])
    }
    func u64(_ at: Int) -> UInt64 { UInt64(u32(at)) << 32 | UInt64(u32(at + 4)) }

    // MARK: Tracks

    mutating func readTrack(_ trak: Box) throws(MP4ReaderError) -> TrackInfo? {
        guard let tkhd = try child(trak, "tkhd"), let mdia = try child(trak, "mdia"),
            let mdhd = try child(mdia, "mdhd"), let hdlr = try child(mdia, "hdlr"),
            let minf = try child(mdia, "minf"), let stbl = try child(minf, "stbl"), let stsd = try child(stbl, "stsd")
        else { return nil }
        let v1 = bytes[tkhd.payload] == 1
        try field(tkhd, v1 ? 24 : 16)
        let id = Int(u32(tkhd.payload + (v1 ? 20 : 12)))
        let mv1 = bytes[mdhd.payload] == 1
        try field(mdhd, mv1 ? 24 : 16)
        let timescale = Int64(u32(mdhd.payload + (mv1 ? 20 : 12)))
        guard timescale > 0 else { throw .malformedBox(offset: mdhd.start, type: "mdhd", reason: "timescale 0") }
        try field(hdlr, 12)
        let handler = String(decoding: bytes[(hdlr.payload + 8)..<(hdlr.payload + 12)], as: UTF8.self)
        try field(stsd, 8)
        var copy = self
        guard let entry = try copy.children(stsd.payload + 8, stsd.end).first else { return nil }

        var track = WebMReader.Track(
            number: id, codecID: entry.type, codec: nil,
            kind: handler == "vide" ? .video : handler == "soun" ? .audio : nil,
            width: 0, height: 0, channels: 0, codecPrivate: [], codecDelayNanoseconds: 0)
        switch entry.type {
        case "avc1", "avc3": track.codec = .h264
        case "vp08": track.codec = .vp8
        case "vp09": track.codec = .vp9
        case "av01": track.codec = .av1
        case "Opus": track.codec = .opus
        default: break
        }
        if track.kind == .video {
            try field(entry, 78)
            track.width = Int(u16(entry.payload + 24))
            track.height = Int(u16(entry.payload + 26))
            let config = ["avc1": "avcC", "avc3": "avcC", "av01": "av1C", "vp09": "vpcC"][entry.type]
            for box in try copy.children(entry.payload + 78, entry.end) where box.type == config {
                track.codecPrivate = Array(bytes[box.payload..<box.end])
            }
        } else if track.kind == .audio {
            try field(entry, 28)
            track.channels = Int(u16(entry.payload + 16))
            for box in try copy.children(entry.payload + 28, entry.end) where box.type == "dOps" {
                track.codecPrivate = opusHead(dOps: Array(bytes[box.payload..<box.end]))
            }
        }
        var info = TrackInfo(track: track, timescale: timescale)
        try readSampleTables(stbl, into: &info)
        return info
    }

    /// `dOps` is OpusHead without its magic, big-endian; OpusHead is little-endian (RFC 7845 §5.1).
    func opusHead(dOps d: [UInt8]) -> [UInt8] {
        guard d.count >= 11 else { return [] }
        var head = Array("OpusHead".utf8)
        head.append(1)
        head.append(d[1])
        head += [d[3], d[2]]  // pre-skip
        head += [d[7], d[6], d[5], d[4]]  // input sample rate
        head += [d[9], d[8]]  // output gain
        head += d[10...]
        return head
    }

    mutating func readSampleTables(_ stbl: Box, into info: inout TrackInfo) throws(MP4ReaderError) {
        for box in try children(stbl.payload, stbl.end) {
            let p = box.payload
            switch box.type {
            case "stts", "ctts", "stsc", "stco", "co64", "stss":
                try field(box, 8)
                let count = Int(u32(p + 4))
                let width = ["stts": 8, "ctts": 8, "stsc": 12, "stco": 4, "co64": 8, "stss": 4][box.type] ?? 4
                guard count <= (box.end - p - 8) / width else {
                    throw .malformedBox(offset: box.start, type: box.type, reason: "\(count) entries")
                }
                for i in 0..<count {
                    let e = p + 8 + i * width
                    switch box.type {
                    case "stts": info.durations.append((Int(u32(e)), Int64(u32(e + 4))))
                    case "ctts": info.offsets.append((Int(u32(e)), Int64(Int32(bitPattern: u32(e + 4)))))
                    case "stsc": info.chunkRuns.append((Int(u32(e)), Int(u32(e + 4))))
                    case "stco": info.chunkOffsets.append(Int(u32(e)))
                    case "co64": info.chunkOffsets.append(Int(clamping: u64(e)))
                    default: info.syncSamples = (info.syncSamples ?? []).union([Int(u32(e))])
                    }
                }
            case "stsz":
                try field(box, 12)
                let size = Int(u32(p + 4))
                let count = Int(u32(p + 8))
                if size != 0 {
                    guard count <= bytes.count else {
                        throw .malformedBox(offset: box.start, type: "stsz", reason: "count")
                    }
                    info.sizes = Array(repeating: size, count: count)
                } else {
                    guard count <= (box.end - p - 12) / 4 else {
                        throw .malformedBox(offset: box.start, type: "stsz", reason: "\(count) entries")
                    }
                    info.sizes = (0..<count).map { Int(u32(p + 12 + $0 * 4)) }
                }
            default: break
            }
        }
    }

    /// The samples a plain file's tables describe (none in a fragmented file's empty tables).
    func tableSamples(_ info: TrackInfo) -> [WebMReader.Frame] {
        var out: [WebMReader.Frame] = []
        var index = 0
        var time: Int64 = 0
        var durations = info.durations.makeIterator()
        var run = durations.next()
        var ctts = info.offsets.makeIterator()
        var offset = ctts.next()
        for (c, chunkOffset) in info.chunkOffsets.enumerated() {
            let chunk = c + 1
            let perChunk = info.chunkRuns.last(where: { $0.firstChunk <= chunk })?.samplesPerChunk ?? 0
            var at = chunkOffset
            for _ in 0..<perChunk {
                guard index < info.sizes.count else { return out }
                let size = info.sizes[index]
                guard at >= 0, size >= 0, at <= bytes.count - size else { return out }  // a cut file
                let composition = offset?.offset ?? 0
                out.append(
                    WebMReader.Frame(
                        track: info.track.number, kind: info.track.kind,
                        timestampNanoseconds: nanos(time + composition, info.timescale),
                        isKeyframe: info.syncSamples?.contains(index + 1) ?? true, data: Array(bytes[at..<(at + size)]))
                )
                at += size
                index += 1
                if var r = run {
                    time += r.delta
                    r.count -= 1
                    run = r.count > 0 ? r : durations.next()
                }
                if var o = offset {
                    o.count -= 1
                    offset = o.count > 0 ? o : ctts.next()
                }
            }
        }
        return out
    }

    func nanos(_ ticks: Int64, _ timescale: Int64) -> Int64 {
        Int64((Double(ticks) * 1e9 / Double(timescale)).rounded())
    }

    // MARK: Fragments

    mutating func readFragment(_ moof: Box) throws(MP4ReaderError) {
        for traf in try children(moof.payload, moof.end) where traf.type == "traf" {
            guard let tfhd = try child(traf, "tfhd") else { continue }
            try field(tfhd, 8)
            let flags = u32(tfhd.payload) & 0xFF_FFFF
            guard let t = tracks.firstIndex(where: { $0.track.number == Int(u32(tfhd.payload + 4)) }) else { continue }
            var at = tfhd.payload + 8
            var base = moof.start
            var duration = tracks[t].defaultDuration
            var size = tracks[t].defaultSize
            var sampleFlags = tracks[t].defaultFlags
            let optional: [(UInt32, Int)] = [(0x1, 8), (0x2, 4), (0x8, 4), (0x10, 4), (0x20, 4)]
            for (bit, width) in optional where flags & bit != 0 {
                guard at + width <= tfhd.end else {
                    throw .malformedBox(offset: tfhd.start, type: "tfhd", reason: "fields overrun it")
                }
                switch bit {
                case 0x1: base = Int(clamping: u64(at))
                case 0x8: duration = Int64(u32(at))
                case 0x10: size = Int(u32(at))
                case 0x20: sampleFlags = u32(at)
                default: break
                }
                at += width
            }
            var time = tracks[t].nextDecodeTime
            if let tfdt = try child(traf, "tfdt") {
                let v1 = bytes[tfdt.payload] == 1
                try field(tfdt, v1 ? 12 : 8)
                time = v1 ? Int64(clamping: u64(tfdt.payload + 4)) : Int64(u32(tfdt.payload + 4))
            }
            var dataAt = base
            for trun in try children(traf.payload, traf.end) where trun.type == "trun" {
                try field(trun, 8)
                let f = u32(trun.payload) & 0xFF_FFFF
                let v1 = bytes[trun.payload] == 1
                let count = Int(u32(trun.payload + 4))
                var p = trun.payload + 8
                if f & 0x1 != 0 {
                    try field(trun, 12)
                    dataAt = base + Int(Int32(bitPattern: u32(p)))
                    p += 4
                }
                var firstFlags: UInt32?
                if f & 0x4 != 0 {
                    guard p + 4 <= trun.end else {
                        throw .malformedBox(offset: trun.start, type: "trun", reason: "flags")
                    }
                    firstFlags = u32(p)
                    p += 4
                }
                let width = [0x100, 0x200, 0x400, 0x800].filter { f & UInt32($0) != 0 }.count * 4
                guard count <= (trun.end - p) / max(width, 1) || width == 0 else {
                    throw .malformedBox(offset: trun.start, type: "trun", reason: "\(count) samples")
                }
                for i in 0..<count {
                    var d = duration
                    var s = size
                    var fl = i == 0 ? firstFlags ?? sampleFlags : sampleFlags
                    var cto: Int64 = 0
                    if f & 0x100 != 0 {
                        d = Int64(u32(p))
                        p += 4
                    }
                    if f & 0x200 != 0 {
                        s = Int(u32(p))
                        p += 4
                    }
                    if f & 0x400 != 0 {
                        fl = u32(p)
                        p += 4
                    }
                    if f & 0x800 != 0 {
                        cto = v1 ? Int64(Int32(bitPattern: u32(p))) : Int64(u32(p))
                        p += 4
                    }
                    guard dataAt >= 0, s >= 0, dataAt <= bytes.count - s else {
                        truncated = true
                        return
                    }
                    let track = tracks[t].track
                    samples[track.number, default: []].append(
                        WebMReader.Frame(
                            track: track.number, kind: track.kind,
                            timestampNanoseconds: nanos(time + cto, tracks[t].timescale),
                            isKeyframe: fl & 0x1_0000 == 0, data: Array(bytes[dataAt..<(dataAt + s)])))
                    dataAt += s
                    time += d
                }
            }
            tracks[t].nextDecodeTime = time
        }
    }
}

public import RTCWire

/// Why a WebM/Matroska file could not be read.
public enum WebMReaderError: Error, Equatable, CustomStringConvertible {
    /// The file could not be opened or read; `errno` is the OS error.
    case cannotOpen(path: String, errno: Int32)
    /// The input ends before the EBML header, Segment, Info or Tracks are complete.
    case truncatedHeader(offset: Int)
    /// The input does not start with an EBML header.
    case notEBML
    /// The EBML DocType is neither `webm` nor `matroska`.
    case unsupportedDocType(String)
    /// No Segment element follows the EBML header.
    case missingSegment
    /// An element ID or size at `offset` is not a valid EBML variable-length integer, or a child
    /// overruns its parent.
    case malformedElement(offset: Int, reason: String)
    /// A block at `offset` uses Xiph, EBML or fixed-size lacing, which this reader does not split.
    case unsupportedLacing(offset: Int, kind: String)
    /// A block at `offset` refers to a track number that Tracks does not declare.
    case unknownTrack(offset: Int, track: Int)

    public var description: String {
        switch self {
        case .cannotOpen(let path, let errno): return "cannot open \(path): errno \(errno)"
        case .truncatedHeader(let offset): return "WebM header truncated at byte \(offset)"
        case .notEBML: return "not an EBML file"
        case .unsupportedDocType(let t): return "EBML DocType '\(t)' is not webm/matroska"
        case .missingSegment: return "no Segment element"
        case .malformedElement(let offset, let reason): return "malformed EBML at byte \(offset): \(reason)"
        case .unsupportedLacing(let offset, let kind):
            return "block at byte \(offset) uses \(kind) lacing (unsupported)"
        case .unknownTrack(let offset, let track): return "block at byte \(offset) has undeclared track \(track)"
        }
    }
}

/// Reads the tracks and blocks of a WebM (Matroska) file: files from ``WebMWriter`` and from
/// ffmpeg, with known- or unknown-size Segment and Clusters.
///
/// Blocks are returned in file order. A file cut inside its last cluster (a killed recorder)
/// reads up to the last whole block and sets ``isTruncated``. Laced blocks are rejected with
/// ``WebMReaderError/unsupportedLacing(offset:kind:)``; neither our writer nor ffmpeg laces
/// VP8 or Opus.
public struct WebMReader: Sendable {
    /// One entry of Tracks.
    public struct Track: Sendable, Equatable {
        /// Track number used by blocks.
        public var number: Int
        /// Matroska CodecID, e.g. `V_VP8`, `A_OPUS`.
        public var codecID: String
        /// Our codec for the CodecID, or nil for codecs Understudy does not handle.
        public var codec: MediaCodec?
        /// Audio or video, from the codec (or TrackType when the codec is unknown).
        public var kind: MediaKind?
        /// Video picture size (0 when absent).
        public var width: Int
        /// Video picture height (0 when absent).
        public var height: Int
        /// Audio channels (0 when absent).
        public var channels: Int
        /// CodecPrivate (the OpusHead for Opus), empty when absent.
        public var codecPrivate: [UInt8]
        /// CodecDelay in nanoseconds (0 when absent).
        public var codecDelayNanoseconds: Int64
    }

    /// One SimpleBlock or Block.
    public struct Frame: Sendable {
        /// Track number.
        public var track: Int
        /// Kind of that track, if known.
        public var kind: MediaKind?
        /// Cluster timecode plus block offset, scaled by TimecodeScale, in nanoseconds (as stored:
        /// CodecDelay is not subtracted).
        public var timestampNanoseconds: Int64
        /// Keyframe flag of a SimpleBlock; for a BlockGroup, true when it has no ReferenceBlock.
        public var isKeyframe: Bool
        /// The frame's codec bytes.
        public var data: [UInt8]
    }

    /// Nanoseconds per timecode unit (Info/TimecodeScale, default 1 000 000).
    public let timecodeScale: Int64
    /// Info/Duration in nanoseconds, when present.
    public let durationNanoseconds: Double?
    /// Tracks in file order.
    public let tracks: [Track]
    /// Every block, in file order.
    public let frames: [Frame]
    /// True when the input ended inside an element (the rest was dropped).
    public let isTruncated: Bool

    /// Reads the file at `path`.
    public init(path: String) throws(WebMReaderError) {
        try self.init(bytes: readWholeFile(path) { WebMReaderError.cannotOpen(path: path, errno: $0) })
    }

    /// Parses a whole file held in memory.
    public init(bytes: [UInt8]) throws(WebMReaderError) {
        var parser = Parser(bytes: bytes)
        try parser.run()
        timecodeScale = parser.timecodeScale
        durationNanoseconds = parser.durationTicks.map { $0 * Double(parser.timecodeScale) }
        tracks = parser.tracks
        frames = parser.frames
        isTruncated = parser.truncated
    }

    /// The track with `number`, if declared.
    public func track(number: Int) -> Track? { tracks.first { $0.number == number } }

    /// The first track of `kind`, if any.
    public func firstTrack(of kind: MediaKind) -> Track? { tracks.first { $0.kind == kind } }

    /// Frames of track `number`, in file order.
    public func frames(track number: Int) -> [Frame] { frames.filter { $0.track == number } }
}

// MARK: - Parser

private enum ID {
    static let ebml: UInt32 = 0x1A45_DFA3
    static let docType: UInt32 = 0x4282
    static let segment: UInt32 = 0x1853_8067
    static let seekHead: UInt32 = 0x114D_9B74
    static let info: UInt32 = 0x1549_A966
    static let timecodeScale: UInt32 = 0x2A_D7B1
    static let duration: UInt32 = 0x4489
    static let tracks: UInt32 = 0x1654_AE6B
    static let trackEntry: UInt32 = 0xAE
    static let trackNumber: UInt32 = 0xD7
    static let trackType: UInt32 = 0x83
    static let codecID: UInt32 = 0x86
    static let codecPrivate: UInt32 = 0x63A2
    static let codecDelay: UInt32 = 0x56AA
    static let video: UInt32 = 0xE0
    static let pixelWidth: UInt32 = 0xB0
    static let pixelHeight: UInt32 = 0xBA
    static let audio: UInt32 = 0xE1
    static let channels: UInt32 = 0x9F
    static let cluster: UInt32 = 0x1F43_B675
    static let timecode: UInt32 = 0xE7
    static let simpleBlock: UInt32 = 0xA3
    static let blockGroup: UInt32 = 0xA0
    static let block: UInt32 = 0xA1
    static let referenceBlock: UInt32 = 0xFB
    static let cues: UInt32 = 0x1C53_BB6B
    static let tags: UInt32 = 0x1254_C367
    static let chapters: UInt32 = 0x1043_A770
    static let attachments: UInt32 = 0x1941_A469

    /// IDs that end an unknown-size Cluster: its siblings and parents.
    static func endsCluster(_ id: UInt32) -> Bool {
        switch id {
        case cluster, cues, tags, chapters, attachments, seekHead, info, tracks, segment, ebml: return true
        default: return false
        }
    }
}

private struct Element {
    var id: UInt32
    /// Offset of the ID.
    var start: Int
    /// Offset of the data.
    var dataStart: Int
    /// Data size; nil = unknown size.
    var size: Int?
}

private struct Parser {
    let bytes: [UInt8]
    var timecodeScale: Int64 = 1_000_000
    var durationTicks: Double?
    var tracks: [WebMReader.Track] = []
    var frames: [WebMReader.Frame] = []
    var truncated = false
    private var sawTracks = false

    init(bytes: [UInt8]) { self.bytes = bytes }

    /// Reads an element header at `pos`. Returns nil when the input ends inside the header.
    func header(at pos: Int) throws(WebMReaderError) -> Element? {
        guard pos < bytes.count else { return nil }
        let first = bytes[pos]
        let idLength = first.leadingZeroBitCount + 1
        guard idLength <= 4 else { throw .malformedElement(offset: pos, reason: "ID longer than 4 bytes") }
        guard pos + idLength <= bytes.count else { return nil }
        var id: UInt32 = 0
        for i in 0..<idLength { id = id << 8 | UInt32(bytes[pos + i]) }
        let sizePos = pos + idLength
        guard sizePos < bytes.count else { return nil }
        let sizeFirst = bytes[sizePos]
        guard sizeFirst != 0 else { throw .malformedElement(offset: sizePos, reason: "size longer than 8 bytes") }
        let sizeLength = sizeFirst.leadingZeroBitCount + 1
        guard sizePos + sizeLength <= bytes.count else { return nil }
        var value = UInt64(sizeFirst) & (0xFF >> UInt64(sizeLength))
        var allOnes = value == (0xFF >> UInt64(sizeLength))
        for i in 1..<max(1, sizeLength) where sizeLength > 1 {
            let b = bytes[sizePos + i]
            value = value << 8 | UInt64(b)
            if b != 0xFF { allOnes = false }
        }
        let dataStart = sizePos + sizeLength
        if allOnes { return Element(id: id, start: pos, dataStart: dataStart, size: nil) }
        guard value <= UInt64(Int.max / 2) else { throw .malformedElement(offset: sizePos, reason: "size too large") }
        return Element(id: id, start: pos, dataStart: dataStart, size: Int(value))
    }

    /// End of a known-size element, or nil if it extends past the input.
    func end(of e: Element) -> Int? {
        guard let size = e.size, size <= bytes.count - e.dataStart else { return nil }
        return e.dataStart + size
    }

    func uint(_ e: Element) throws(WebMReaderError) -> UInt64 {
        guard let end = end(of: e) else { throw .truncatedHeader(offset: e.start) }
        guard end - e.dataStart <= 8 else {
            throw .malformedElement(offset: e.start, reason: "integer wider than 8 bytes")
        }
        var v: UInt64 = 0
        for i in e.dataStart..<end { v = v << 8 | UInt64(bytes[i]) }
        return v
    }

    func float(_ e: Element) throws(WebMReaderError) -> Double {
        let width = (e.size ?? 0)
        let v = try uint(e)
        switch width {
        case 4: return Double(Float(bitPattern: UInt32(truncatingIfNeeded: v)))
        case 8: return Double(bitPattern: v)
        case 0: return 0
        default: throw .malformedElement(offset: e.start, reason: "float of \(width) bytes")
        }
    }

    func data(_ e: Element) throws(WebMReaderError) -> [UInt8] {
        guard let end = end(of: e) else { throw .truncatedHeader(offset: e.start) }
        return Array(bytes[e.dataStart..<end])
    }

    func string(_ e: Element) throws(WebMReaderError) -> String {
        let raw = try data(e)
        return String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
    }

    /// Calls `body` for each child of a known-size, fully present master element.
    func children(of parent: Element, _ body: (Element) throws(WebMReaderError) -> Void) throws(WebMReaderError) {
        guard let parentEnd = end(of: parent) else { throw .truncatedHeader(offset: parent.start) }
        var pos = parent.dataStart
        while pos < parentEnd {
            guard let child = try header(at: pos), let childEnd = end(of: child), childEnd <= parentEnd else {
                throw .malformedElement(offset: pos, reason: "child overruns its parent")
            }
            try body(child)
            pos = childEnd
        }
    }

    mutating func run() throws(WebMReaderError) {
        guard bytes.count >= 4 else { throw bytes.isEmpty ? .notEBML : .truncatedHeader(offset: 0) }
        guard bytes[0] == 0x1A, bytes[1] == 0x45, bytes[2] == 0xDF, bytes[3] == 0xA3 else { throw .notEBML }
        guard let ebml = try header(at: 0), let ebmlEnd = end(of: ebml) else { throw .truncatedHeader(offset: 0) }
        var docType = "matroska"  // the EBML default
        try children(of: ebml) { (e: Element) throws(WebMReaderError) in
            if e.id == ID.docType { docType = try string(e) }
        }
        guard docType == "webm" || docType == "matroska" else { throw .unsupportedDocType(docType) }

        // Skip anything (e.g. Void) between the header and the Segment.
        var pos = ebmlEnd
        var segment: Element?
        while pos < bytes.count {
            guard let e = try header(at: pos) else { throw .truncatedHeader(offset: pos) }
            if e.id == ID.segment {
                segment = e
                break
            }
            guard let next = end(of: e) else { throw .missingSegment }
            pos = next
        }
        guard let segment else {
            throw pos >= bytes.count ? .truncatedHeader(offset: pos) : .missingSegment
        }
        let segmentEnd: Int
        if let size = segment.size, size <= bytes.count - segment.dataStart {
            segmentEnd = segment.dataStart + size
        } else {
            // Unknown size (live writer) or cut short: read to the end of the input.
            segmentEnd = bytes.count
            if segment.size != nil { truncated = true }
        }
        try readSegment(from: segment.dataStart, to: segmentEnd)
    }

    private mutating func readSegment(from start: Int, to segmentEnd: Int) throws(WebMReaderError) {
        var pos = start
        while pos < segmentEnd {
            guard let e = try header(at: pos) else {
                try requireTracks(at: pos)
                truncated = true
                return
            }
            switch e.id {
            case ID.cluster:
                try requireTracks(at: pos)
                let (next, complete) = try readCluster(e, limit: segmentEnd)
                if !complete {
                    truncated = true
                    return
                }
                pos = next
            case ID.info, ID.tracks:
                guard let next = end(of: e), next <= segmentEnd else { throw .truncatedHeader(offset: e.start) }
                if e.id == ID.info { try readInfo(e) } else { try readTracks(e) }
                pos = next
            default:
                guard let next = end(of: e), next <= segmentEnd else {
                    // A cut inside trailing Cues/Tags loses nothing we return.
                    try requireTracks(at: pos)
                    truncated = true
                    return
                }
                pos = next
            }
        }
    }

    private func requireTracks(at pos: Int) throws(WebMReaderError) {
        guard sawTracks else { throw .truncatedHeader(offset: pos) }
    }

    private mutating func readInfo(_ info: Element) throws(WebMReaderError) {
        var scale: Int64 = 1_000_000
        var duration: Double?
        try children(of: info) { (e: Element) throws(WebMReaderError) in
            switch e.id {
            case ID.timecodeScale:
                let v = try uint(e)
                guard v > 0, v <= 1_000_000_000 else {
                    throw .malformedElement(offset: e.start, reason: "TimecodeScale \(v)")
                }
                scale = Int64(v)
            case ID.duration: duration = try float(e)
            default: break
            }
        }
        timecodeScale = scale
        durationTicks = duration
    }

    private mutating func readTracks(_ element: Element) throws(WebMReaderError) {
        var list: [WebMReader.Track] = []
        try children(of: element) { (entry: Element) throws(WebMReaderError) in
            guard entry.id == ID.trackEntry else { return }
            var t = WebMReader.Track(
                number: 0, codecID: "", codec: nil, kind: nil, width: 0, height: 0, channels: 0, codecPrivate: [],
                codecDelayNanoseconds: 0)
            var trackType: UInt64 = 0
            try children(of: entry) { (e: Element) throws(WebMReaderError) in
                switch e.id {
                case ID.trackNumber: t.number = Int(clamping: try uint(e))
                case ID.trackType: trackType = try uint(e)
                case ID.codecID: t.codecID = try string(e)
                case ID.codecPrivate: t.codecPrivate = try data(e)
                case ID.codecDelay: t.codecDelayNanoseconds = Int64(clamping: try uint(e))
                case ID.video:
                    try children(of: e) { (v: Element) throws(WebMReaderError) in
                        if v.id == ID.pixelWidth { t.width = Int(clamping: try uint(v)) }
                        if v.id == ID.pixelHeight { t.height = Int(clamping: try uint(v)) }
                    }
                case ID.audio:
                    try children(of: e) { (a: Element) throws(WebMReaderError) in
                        if a.id == ID.channels { t.channels = Int(clamping: try uint(a)) }
                    }
                default: break
                }
            }
            guard t.number > 0 else {
                throw .malformedElement(offset: entry.start, reason: "TrackEntry without TrackNumber")
            }
            switch t.codecID {
            case "V_VP8": t.codec = .vp8
            case "V_VP9": t.codec = .vp9
            case "V_AV1": t.codec = .av1
            case "V_MPEG4/ISO/AVC": t.codec = .h264
            case "A_OPUS": t.codec = .opus
            default: break
            }
            t.kind = t.codec?.kind ?? (trackType == 1 ? .video : trackType == 2 ? .audio : nil)
            list.append(t)
        }
        tracks = list
        sawTracks = true
    }

    /// Reads one Cluster. Returns the offset after it and whether it was complete.
    private mutating func readCluster(_ cluster: Element, limit: Int) throws(WebMReaderError) -> (Int, Bool) {
        let known = cluster.size.map { $0 <= limit - cluster.dataStart ? cluster.dataStart + $0 : nil }
        let clusterEnd: Int
        switch known {
        case .some(.some(let e)): clusterEnd = e
        case .some(.none): clusterEnd = limit  // cut short: read the whole blocks that are there
        case .none: clusterEnd = limit  // unknown size: ends at the next top-level ID
        }
        var clusterTime: Int64 = 0
        var pos = cluster.dataStart
        while pos < clusterEnd {
            guard let e = try header(at: pos) else { return (pos, false) }
            if cluster.size == nil, ID.endsCluster(e.id) { return (pos, true) }
            guard let next = end(of: e), next <= clusterEnd else {
                // The last element was cut. A known-size cluster that overran its parent is malformed.
                if case .some(.some) = known {
                    throw .malformedElement(offset: pos, reason: "block overruns its cluster")
                }
                return (pos, false)
            }
            switch e.id {
            case ID.timecode: clusterTime = Int64(clamping: try uint(e))
            case ID.simpleBlock:
                try readBlock(from: e.dataStart, to: next, clusterTime: clusterTime, simple: true, hasReference: false)
            case ID.blockGroup:
                var block: Element?
                var hasReference = false
                try children(of: e) { (c: Element) throws(WebMReaderError) in
                    if c.id == ID.block { block = c }
                    if c.id == ID.referenceBlock { hasReference = true }
                }
                if let block, let blockEnd = end(of: block) {
                    try readBlock(
                        from: block.dataStart, to: blockEnd, clusterTime: clusterTime, simple: false,
                        hasReference: hasReference)
                }
            default: break
            }
            pos = next
        }
        return (clusterEnd, known != .some(.none))
    }

    private mutating func readBlock(
        from start: Int, to end: Int, clusterTime: Int64, simple: Bool, hasReference: Bool
    ) throws(WebMReaderError) {
        // Track number is an EBML vint (marker bit stripped), then int16 time, then flags.
        guard start < end else { throw .malformedElement(offset: start, reason: "empty block") }
        let first = bytes[start]
        guard first != 0 else { throw .malformedElement(offset: start, reason: "bad track number") }
        let length = first.leadingZeroBitCount + 1
        guard length <= 4, end - start >= length + 3 else {
            throw .malformedElement(offset: start, reason: "block header too short")
        }
        var track = Int(first) & (0xFF >> length)
        for i in 1..<max(1, length) where length > 1 { track = track << 8 | Int(bytes[start + i]) }
        let p = start + length
        let rel = Int16(bitPattern: UInt16(bytes[p]) << 8 | UInt16(bytes[p + 1]))
        let flags = bytes[p + 2]
        switch (flags >> 1) & 0x03 {
        case 0: break
        case 1: throw .unsupportedLacing(offset: start, kind: "Xiph")
        case 2: throw .unsupportedLacing(offset: start, kind: "fixed-size")
        default: throw .unsupportedLacing(offset: start, kind: "EBML")
        }
        guard let t = tracks.first(where: { $0.number == track }) else {
            throw .unknownTrack(offset: start, track: track)
        }
        let ticks = clusterTime &+ Int64(rel)
        let (ns, overflow) = ticks.multipliedReportingOverflow(by: timecodeScale)
        guard !overflow else { throw .malformedElement(offset: start, reason: "timestamp overflow") }
        frames.append(
            WebMReader.Frame(
                track: track, kind: t.kind, timestampNanoseconds: ns,
                isKeyframe: simple ? flags & 0x80 != 0 : !hasReference,
                data: Array(bytes[(p + 3)..<end])))
    }
}

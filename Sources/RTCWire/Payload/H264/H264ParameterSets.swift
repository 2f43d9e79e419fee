/// Reads the bits of a NAL unit's payload, skipping emulation-prevention bytes (`00 00 03`).
@usableFromInline
struct H264BitReader {
    @usableFromInline let bytes: UnsafeRawBufferPointer
    @usableFromInline var index: Int
    @usableFromInline var bit = 0
    @usableFromInline var zeros = 0

    @inlinable
    init(_ bytes: UnsafeRawBufferPointer, from index: Int) {
        self.bytes = bytes
        self.index = index
    }

    @inlinable
    mutating func readBit() -> UInt32? {
        if bit == 0 {
            guard index < bytes.count else { return nil }
            // An emulation-prevention byte after two zero bytes is not part of the data.
            if zeros >= 2, bytes[index] == 3 {
                index += 1
                zeros = 0
                guard index < bytes.count else { return nil }
            }
            zeros = bytes[index] == 0 ? zeros + 1 : 0
        }
        let value = UInt32(bytes[index] >> (7 - UInt8(bit))) & 1
        bit += 1
        if bit == 8 {
            bit = 0
            index += 1
        }
        return value
    }

    @inlinable
    mutating func readBits(_ n: Int) -> UInt32? {
        var v: UInt32 = 0
        for _ in 0..<n {
            guard let b = readBit() else { return nil }
            v = v << 1 | b
        }
        return v
    }

    /// ue(v): Exp-Golomb, at most 31 leading zeros.
    @inlinable
    mutating func readUE() -> UInt32? {
        var leading = 0
        while true {
            guard let b = readBit() else { return nil }
            if b == 1 { break }
            leading += 1
            guard leading <= 31 else { return nil }
        }
        guard let rest = readBits(leading) else { return nil }
        return UInt32((UInt64(1) << UInt64(leading)) - 1 + UInt64(rest))
    }

    /// se(v).
    @inlinable
    mutating func readSE() -> Int32? {
        guard let k = readUE() else { return nil }
        let magnitude = Int32(truncatingIfNeeded: (UInt64(k) + 1) / 2)
        return k & 1 == 1 ? magnitude : -magnitude
    }
}

/// The fields of a sequence parameter set (ITU-T H.264 §7.3.2.1.1) that a recorder and an SFU need.
public struct H264SPS: Sendable, Equatable {
    /// profile_idc.
    public var profile: UInt8
    /// The constraint_set flags byte.
    public var constraints: UInt8
    /// level_idc.
    public var level: UInt8
    /// Picture size after cropping.
    public var width: Int
    /// See ``width``.
    public var height: Int

    /// Parses a whole SPS NAL unit (header byte first, no start code); nil when it is not one or is
    /// cut short.
    public static func parse(_ unit: UnsafeRawBufferPointer) -> H264SPS? {
        guard unit.count >= 4, unit[0] & 0x1F == H264NALType.sps else { return nil }
        let profile = unit[1]
        var r = H264BitReader(unit, from: 4)
        guard r.readUE() != nil else { return nil }  // seq_parameter_set_id
        var chroma: UInt32 = 1
        if [100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135].contains(profile) {
            guard let c = r.readUE(), c <= 3 else { return nil }
            chroma = c
            if chroma == 3 { guard r.readBit() != nil else { return nil } }
            guard r.readUE() != nil, r.readUE() != nil, r.readBit() != nil else { return nil }
            guard let scaling = r.readBit() else { return nil }
            if scaling == 1 {
                for i in 0..<(chroma == 3 ? 12 : 8) {
                    guard let present = r.readBit() else { return nil }
                    guard present == 1 else { continue }
                    var last: Int32 = 8
                    var next: Int32 = 8
                    for _ in 0..<(i < 6 ? 16 : 64) where next != 0 {
                        guard let delta = r.readSE() else { return nil }
                        // delta_scale is within -128...127 in a valid stream; wrap, never trap.
                        next = Int32(truncatingIfNeeded: (Int64(last) + Int64(delta) % 256 + 512) % 256)
                        if next != 0 { last = next }
                    }
                }
            }
        }
        guard r.readUE() != nil, let pocType = r.readUE() else { return nil }
        if pocType == 0 {
            guard r.readUE() != nil else { return nil }
        } else if pocType == 1 {
            guard r.readBit() != nil, r.readSE() != nil, r.readSE() != nil, let n = r.readUE(), n <= 255 else {
                return nil
            }
            for _ in 0..<n { guard r.readSE() != nil else { return nil } }
        } else if pocType != 2 {
            return nil
        }
        guard r.readUE() != nil, r.readBit() != nil, let wMbs = r.readUE(), let hMaps = r.readUE(),
            let frameMbsOnly = r.readBit(), wMbs < 1024, hMaps < 1024
        else { return nil }
        if frameMbsOnly == 0 { guard r.readBit() != nil else { return nil } }
        guard r.readBit() != nil, let cropping = r.readBit() else { return nil }
        var crop: (UInt32, UInt32, UInt32, UInt32) = (0, 0, 0, 0)
        if cropping == 1 {
            guard let l = r.readUE(), let rt = r.readUE(), let t = r.readUE(), let b = r.readUE() else { return nil }
            crop = (l, rt, t, b)
        }
        let unitX = chroma == 0 || chroma == 3 ? 1 : 2
        let unitY = (chroma == 1 ? 2 : 1) * (2 - Int(frameMbsOnly))
        let width = (Int(wMbs) + 1) * 16 - unitX * (Int(min(crop.0, 4096)) + Int(min(crop.1, 4096)))
        let height =
            (2 - Int(frameMbsOnly)) * (Int(hMaps) + 1) * 16 - unitY * (Int(min(crop.2, 4096)) + Int(min(crop.3, 4096)))
        guard width > 0, height > 0 else { return nil }
        return H264SPS(profile: profile, constraints: unit[2], level: unit[3], width: width, height: height)
    }
}

/// The `profile-level-id` of H.264's SDP parameters (RFC 6184 §8.1): profile_idc, the constraint
/// flags and level_idc, and the profile they name, matched as browsers do (libwebrtc's
/// `h264_profile_level_id`): constrained baseline, baseline, main, extended, high and its
/// relatives; two descriptions are compatible when they name the same profile and the same
/// packetization mode; levels may differ (`level-asymmetry-allowed`).
public struct H264ProfileLevelID: Sendable, Equatable {
    /// The profiles negotiation tells apart.
    public enum Profile: String, Sendable, Equatable {
        case constrainedBaseline, baseline, main, extended, constrainedHigh, high, high10, high422, high444
    }

    /// profile_idc.
    public var profileIDC: UInt8
    /// The constraint_set flags (profile-iop).
    public var constraints: UInt8
    /// level_idc.
    public var level: UInt8

    /// Reads six hex digits; nil otherwise.
    public init?(_ text: String) {
        let digits = Array(text.utf8)
        guard digits.count == 6 else { return nil }
        var bytes: [UInt8] = []
        var i = 0
        while i < 6 {
            guard let hi = Self.hex(digits[i]), let lo = Self.hex(digits[i + 1]) else { return nil }
            bytes.append(hi << 4 | lo)
            i += 2
        }
        profileIDC = bytes[0]
        constraints = bytes[1]
        level = bytes[2]
    }

    /// Creates a value from its fields.
    public init(profileIDC: UInt8, constraints: UInt8, level: UInt8) {
        self.profileIDC = profileIDC
        self.constraints = constraints
        self.level = level
    }

    private static func hex(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// The six lowercase hex digits.
    public var text: String {
        let digits = Array("0123456789abcdef")
        var s = ""
        for b in [profileIDC, constraints, level] {
            s.append(digits[Int(b >> 4)])
            s.append(digits[Int(b & 0x0F)])
        }
        return s
    }

    /// The profile named (nil for one browsers do not negotiate). The constraint flags decide between
    /// the baseline-family profiles: constraint_set1 (0x40) makes baseline or main "constrained
    /// baseline" (42e0, 42c0, 4de0...), constraint_set4 and 5 with high make constrained high (640c).
    public var profile: Profile? {
        let set0 = constraints & 0x80 != 0
        let set1 = constraints & 0x40 != 0
        switch profileIDC {
        case 66: return set1 ? .constrainedBaseline : .baseline
        case 77: return set0 ? .constrainedBaseline : (set1 ? .constrainedBaseline : .main)
        case 88: return set1 ? (set0 ? .constrainedBaseline : .main) : (set0 ? .baseline : .extended)
        case 100: return constraints & 0x0C == 0x0C ? .constrainedHigh : .high
        case 110: return .high10
        case 122: return .high422
        case 244: return .high444
        default: return nil
        }
    }

    /// The value browsers assume when the parameter is absent (RFC 6184 §8.1: baseline, level 1).
    public static let `default` = H264ProfileLevelID(profileIDC: 0x42, constraints: 0x00, level: 0x0A)
}

/// H.264's SDP format parameters as negotiation compares them.
public struct H264FormatParameters: Sendable, Equatable {
    /// profile-level-id (``H264ProfileLevelID/default`` when absent).
    public var profileLevelID: H264ProfileLevelID
    /// packetization-mode: 0 (single NAL units) or 1 (non-interleaved, STAP-A and FU-A).
    public var packetizationMode: Int
    /// level-asymmetry-allowed=1.
    public var levelAsymmetryAllowed: Bool
    /// sprop-parameter-sets, as written (base64 units separated by commas).
    public var spropParameterSets: String?

    /// Reads the parameters of an fmtp line; nil when profile-level-id is malformed or the mode is
    /// one we do not implement (2, interleaved).
    public init?(_ parameters: [SDPParameter]) {
        let plid = parameters.value(for: "profile-level-id")
        if let plid {
            guard let value = H264ProfileLevelID(plid) else { return nil }
            profileLevelID = value
        } else {
            profileLevelID = .default
        }
        let mode = parameters.value(for: "packetization-mode").map { Int($0) ?? -1 } ?? 0
        guard mode == 0 || mode == 1 else { return nil }
        packetizationMode = mode
        levelAsymmetryAllowed = parameters.value(for: "level-asymmetry-allowed") == "1"
        spropParameterSets = parameters.value(for: "sprop-parameter-sets")
    }

    /// Creates parameters.
    public init(
        profileLevelID: H264ProfileLevelID, packetizationMode: Int, levelAsymmetryAllowed: Bool = true,
        spropParameterSets: String? = nil
    ) {
        self.profileLevelID = profileLevelID
        self.packetizationMode = packetizationMode
        self.levelAsymmetryAllowed = levelAsymmetryAllowed
        self.spropParameterSets = spropParameterSets
    }

    /// Whether an answer may pair these with `other`: the same profile and packetization mode
    /// (RFC 6184 §8.2.2; levels need not match, as libwebrtc negotiates).
    public func isCompatible(with other: H264FormatParameters) -> Bool {
        guard let mine = profileLevelID.profile, mine == other.profileLevelID.profile else { return false }
        return packetizationMode == other.packetizationMode
    }

    /// The fmtp value: `level-asymmetry-allowed=1;packetization-mode=N;profile-level-id=XXXXXX`
    /// (browsers' order).
    public var fmtp: String {
        var s = levelAsymmetryAllowed ? "level-asymmetry-allowed=1;" : ""
        s += "packetization-mode=\(packetizationMode);profile-level-id=\(profileLevelID.text)"
        if let spropParameterSets { s += ";sprop-parameter-sets=\(spropParameterSets)" }
        return s
    }

    /// The parameter sets of `sprop-parameter-sets` as one Annex B byte string (empty when absent or
    /// undecodable).
    public var spropAnnexB: [UInt8] {
        guard let spropParameterSets else { return [] }
        var out: [UInt8] = []
        for part in spropParameterSets.split(separator: ",") {
            guard let unit = Base64.decode(String(part)), !unit.isEmpty, unit[0] & 0x80 == 0 else { return [] }
            out += [0, 0, 0, 1]
            out += unit
        }
        return out
    }
}

extension RTPCodec {
    /// The codec this stack implements in this format, if any: Opus, VP8, or H.264 in packetization
    /// mode 0 or 1 with a profile browsers negotiate (``H264ProfileLevelID/profile``).
    public var usableCodec: MediaCodec? {
        guard let codec = mediaCodec else { return nil }
        guard codec == .h264 else { return codec }
        guard let p = H264FormatParameters(parameters), p.profileLevelID.profile != nil else { return nil }
        return codec
    }
}

extension H264FormatParameters {
    /// The `sprop-parameter-sets` value (RFC 6184 §8.1: base64 units, comma-separated) for the first
    /// SPS and the first PPS of an Annex B access unit; nil without both. The inverse of
    /// ``spropAnnexB``, for a session description that lets a receiver decode from any IDR.
    public static func spropParameterSets(fromAnnexB accessUnit: UnsafeRawBufferPointer) -> String? {
        var sps: String?
        var pps: String?
        H264AnnexB.forEachUnit(accessUnit) { unit in
            let t = unit[0] & 0x1F
            if t == H264NALType.sps, sps == nil {
                sps = Base64.encode(unit)
            } else if t == H264NALType.pps, pps == nil {
                pps = Base64.encode(unit)
            }
        }
        guard let sps, let pps else { return nil }
        return sps + "," + pps
    }
}

/// Base64 (RFC 4648) for SDP parameters, without Foundation.
enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Standard alphabet with `=` padding.
    static func encode(_ bytes: UnsafeRawBufferPointer) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i < bytes.count {
            let n = min(3, bytes.count - i)
            var v = UInt32(bytes[i]) << 16
            if n > 1 { v |= UInt32(bytes[i + 1]) << 8 }
            if n > 2 { v |= UInt32(bytes[i + 2]) }
            for k in 0..<4 {
                out.append(k <= n ? alphabet[Int(v >> UInt32(18 - 6 * k)) & 0x3F] : UInt8(ascii: "="))
            }
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func decode(_ text: String) -> [UInt8]? {
        var out: [UInt8] = []
        var acc: UInt32 = 0
        var bits = 0
        for c in text.utf8 {
            let v: UInt32
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): v = UInt32(c - UInt8(ascii: "A"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): v = UInt32(c - UInt8(ascii: "a")) + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = UInt32(c - UInt8(ascii: "0")) + 52
            case UInt8(ascii: "+"), UInt8(ascii: "-"): v = 62
            case UInt8(ascii: "/"), UInt8(ascii: "_"): v = 63
            case UInt8(ascii: "="): continue
            default: return nil
            }
            acc = acc << 6 | v
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: acc >> UInt32(bits)))
                acc &= (1 << UInt32(bits)) - 1
            }
        }
        return out
    }
}

/// The `AVCDecoderConfigurationRecord` (ISO/IEC 14496-15 §5.3.3.1) that Matroska's
/// `V_MPEG4/ISO/AVC` CodecPrivate and MP4's `avcC` box hold: profile and level from the SPS, 4-byte
/// NAL lengths, the sequence and picture parameter sets.
public enum H264DecoderConfiguration {
    /// The record for the SPS and PPS units found in an Annex B access unit; nil without both.
    public static func record(fromAnnexB accessUnit: UnsafeRawBufferPointer) -> [UInt8]? {
        var spss: [[UInt8]] = []
        var ppss: [[UInt8]] = []
        H264AnnexB.forEachUnit(accessUnit) { unit in
            let t = unit[0] & 0x1F
            if t == H264NALType.sps, unit.count >= 4, spss.count < 31, unit.count <= 0xFFFF {
                if !spss.contains(where: { $0.elementsEqual(unit) }) { spss.append([UInt8](unit)) }
            } else if t == H264NALType.pps, unit.count <= 0xFFFF, ppss.count < 255 {
                if !ppss.contains(where: { $0.elementsEqual(unit) }) { ppss.append([UInt8](unit)) }
            }
        }
        guard let sps = spss.first, !ppss.isEmpty else { return nil }
        var out: [UInt8] = [1, sps[1], sps[2], sps[3], 0xFF, 0xE0 | UInt8(spss.count)]
        for s in spss { out += [UInt8(s.count >> 8), UInt8(s.count & 0xFF)] + s }
        out.append(UInt8(ppss.count))
        for p in ppss { out += [UInt8(p.count >> 8), UInt8(p.count & 0xFF)] + p }
        return out
    }

    /// Converts an Annex B access unit to length-prefixed NAL units (4-byte big-endian lengths), the
    /// sample format of Matroska and MP4.
    public static func lengthPrefixed(fromAnnexB accessUnit: UnsafeRawBufferPointer) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(accessUnit.count + 16)
        H264AnnexB.forEachUnit(accessUnit) { unit in
            let n = UInt32(unit.count)
            out += [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)]
            out += unit
        }
        return out
    }
}

import COpenSSL

/// Why an SRTP or SRTCP packet could not be protected or unprotected.
public enum SRTPError: Error, Sendable, Hashable {
    /// The authentication tag did not verify (wrong key, corrupted or forged packet).
    case authFailed
    /// The packet index was already seen or is older than the replay window.
    case replayFailed
    /// The packet is too short or malformed, the buffer too small, or the key the wrong size.
    case badParameter
    /// The crypto library failed (code), or the stream table is full.
    case other(Int32)
}

/// One direction of SRTP/SRTCP protection (RFC 3711, and RFC 7714 for AES-GCM), for every SSRC
/// of that direction, over OpenSSL's ciphers.
///
/// All operations work in place on the caller's buffer and allocate nothing once a stream is
/// known (the first packet of a new SSRC creates its state). Confined to the EventLoop thread;
/// not thread-safe.
///
/// libsrtp, the reference implementation, is kept as the yardstick (``LibSRTPSession``): the
/// tests check both against each other in every direction, and `understudy bench` measures
/// against it. Debian's libsrtp is built on NSS, which allocates a cipher context per packet and
/// holds about 35 KB of key state per connection.
// Safe: confined to its transport's loop thread (libsrtp contexts are not shared).
public final class SRTPSession: @unchecked Sendable {
    /// Which way the packets flow.
    public enum Direction: Sendable, Hashable {
        /// Packets we receive and unprotect.
        case inbound
        /// Packets we protect and send.
        case outbound
    }

    /// Spare bytes a buffer needs after the packet for ``protectRTP(_:length:capacity:)`` and
    /// ``protectRTCP(_:length:capacity:)``: a 16-byte tag and the 4-byte SRTCP index.
    public static let maxTrailerLength = 20
    /// Replay window in packets: wide enough that late NACK retransmissions are still accepted.
    public static let replayWindowSize = 1024
    /// SRTCP replay window (libsrtp's size).
    static let rtcpReplayWindowSize = 128
    /// Most SSRCs one session keeps state for; packets of further SSRCs are refused.
    public static let maxStreams = 1024

    /// The protection profile.
    public let profile: SRTPProfile
    /// The direction this session serves.
    public let direction: Direction

    /// Packets that failed authentication.
    public private(set) var authFailures: UInt64 = 0
    /// Packets rejected as replays.
    public private(set) var replayFailures: UInt64 = 0
    /// Packets rejected for any other reason.
    public private(set) var otherFailures: UInt64 = 0

    private let rtp: SRTPCipher
    private let rtcp: SRTPCipher
    /// Per-SSRC state: the highest index and replay window of RTP and of RTCP.
    private final class Stream {
        /// Received packets only (a sender needs no replay check): nil on outbound sessions.
        let rtpWindow: SRTPReplayWindow?
        let rtcpWindow: SRTPReplayWindow?
        /// Highest RTP index protected or accepted, for the rollover estimate.
        var highestIndex: UInt64 = 0
        var hasIndex = false
        /// Next SRTCP index to send (outbound).
        var nextRTCPIndex: UInt32 = 1

        init(inbound: Bool) {
            rtpWindow = inbound ? SRTPReplayWindow(size: SRTPSession.replayWindowSize) : nil
            rtcpWindow = inbound ? SRTPReplayWindow(size: SRTPSession.rtcpReplayWindowSize) : nil
        }

        func advance(to index: UInt64) {
            if !hasIndex || index > highestIndex { highestIndex = index }
            hasIndex = true
        }
    }
    private var streams: [UInt32: Stream] = [:]
    /// `streams` unretained (each kept alive by `streams`), for the send path.
    private var streamReferences: [UInt32: Unmanaged<Stream>] = [:]
    // The streams of the last four SSRCs looked up, checked before the tables. An SFU's subscribe
    // session interleaves the SSRCs of its consumers (a packet per consumer per received packet),
    // so one "last SSRC" mostly missed, and the table's hash and storage are cold on each packet.
    private var recentSSRC0: UInt32 = 0
    private var recentSSRC1: UInt32 = 0
    private var recentSSRC2: UInt32 = 0
    private var recentSSRC3: UInt32 = 0
    private var recentStream0: Unmanaged<Stream>?
    private var recentStream1: Unmanaged<Stream>?
    private var recentStream2: Unmanaged<Stream>?
    private var recentStream3: Unmanaged<Stream>?
    /// The entry ``remember(_:_:)`` replaces next.
    private var recentNext = 0

    /// Creates a session from a master key and salt.
    /// - Parameters:
    ///   - profile: the negotiated protection profile.
    ///   - key: master key, ``SRTPProfile/keyLength`` bytes.
    ///   - salt: master salt, ``SRTPProfile/saltLength`` bytes.
    ///   - direction: whether this session protects (outbound) or unprotects (inbound).
    public init(profile: SRTPProfile, key: [UInt8], salt: [UInt8], direction: Direction)
        throws(SRTPError)
    {
        guard key.count == profile.keyLength, salt.count == profile.saltLength, key.count == 16 else {
            throw .badParameter
        }
        self.profile = profile
        self.direction = direction
        rtp = try SRTPCipher(
            profile: profile, masterKey: key, masterSalt: salt, rtcp: false, encrypt: direction == .outbound)
        rtcp = try SRTPCipher(
            profile: profile, masterKey: key, masterSalt: salt, rtcp: true, encrypt: direction == .outbound)
    }

    /// Creates the outbound and inbound sessions for keys exported by ``DTLSTransport``.
    public static func pair(_ material: SRTPKeyingMaterial) throws(SRTPError) -> (
        outbound: SRTPSession, inbound: SRTPSession
    ) {
        let outbound = try SRTPSession(
            profile: material.profile, key: material.localKey, salt: material.localSalt,
            direction: .outbound)
        let inbound = try SRTPSession(
            profile: material.profile, key: material.remoteKey, salt: material.remoteSalt,
            direction: .inbound)
        return (outbound, inbound)
    }

    /// Encrypts and authenticates an RTP packet in place.
    /// - Parameters:
    ///   - buffer: packet start.
    ///   - length: RTP packet length.
    ///   - capacity: bytes writable at `buffer`; must be at least `length + maxTrailerLength`.
    /// - Returns: the SRTP packet length.
    public func protectRTP(_ buffer: UnsafeMutableRawPointer, length: Int, capacity: Int)
        throws(SRTPError) -> Int
    {
        guard direction == .outbound, capacity >= length + Self.maxTrailerLength,
            let headerLength = Self.rtpHeaderLength(buffer, end: length)
        else { throw record(.badParameter) }
        let ssrc = buffer.loadBigEndianUInt32(at: 8)
        let sequence = buffer.loadBigEndianUInt16(at: 2)
        guard let unmanaged = streamReference(for: ssrc) else { throw record(.other(0)) }
        // The session keeps its streams for its lifetime, so the per-packet path borrows the stream
        // without a retain and release (about 2 % of an SFU's loop CPU at 100 subscribers).
        return try Self.borrowing(unmanaged) { stream throws(SRTPError) in
            try protectRTP(buffer, length: length, headerLength: headerLength, ssrc: ssrc, sequence: sequence, stream)
        }
    }

    /// Runs `body` with the stream `reference` points to, without a retain and release (the session
    /// keeps its streams for its lifetime), passing `body`'s typed error through.
    @inline(__always)
    private static func borrowing(
        _ reference: Unmanaged<Stream>, _ body: (Stream) throws(SRTPError) -> Int
    ) throws(SRTPError) -> Int {
        var failure: SRTPError?
        let result = reference._withUnsafeGuaranteedRef { stream -> Int in
            do throws(SRTPError) {
                return try body(stream)
            } catch {
                failure = error
                return 0
            }
        }
        if let failure { throw failure }
        return result
    }

    private func protectRTP(
        _ buffer: UnsafeMutableRawPointer, length: Int, headerLength: Int, ssrc: UInt32, sequence: UInt16,
        _ stream: Stream
    ) throws(SRTPError) -> Int {
        // A retransmission keeps its original index (the sender resends NACKed packets as they were).
        let index: UInt64
        if stream.hasIndex {
            index = estimateSRTPIndex(sequence: sequence, highest: stream.highestIndex)
        } else {
            index = UInt64(sequence)
        }
        let roc = UInt32(truncatingIfNeeded: index >> 16)
        let payload = UnsafeMutableRawBufferPointer(start: buffer + headerLength, count: length - headerLength)
        switch profile {
        case .aeadAES128GCM:
            guard
                rtp.sealGCM(
                    ssrc: ssrc, rtpROC: roc, low: UInt32(sequence),
                    aad: UnsafeRawBufferPointer(start: buffer, count: headerLength), payload: payload,
                    tag: buffer + length)
            else { throw record(.other(-1)) }
        case .aes128CMHMACSHA1_80:
            guard rtp.applyKeystream(ssrc: ssrc, index: index, payload: payload) else { throw record(.other(-1)) }
            rtp.authenticate(UnsafeRawBufferPointer(start: buffer, count: length), roc: roc, tag: buffer + length)
        }
        stream.advance(to: index)
        return length + rtp.tagLength
    }

    /// Verifies and decrypts an SRTP packet in place.
    /// - Returns: the RTP packet length (the tag is stripped).
    public func unprotectRTP(_ buffer: UnsafeMutableRawPointer, length: Int) throws(SRTPError) -> Int {
        let tagLength = rtp.tagLength
        guard direction == .inbound, length >= 12 + tagLength,
            let headerLength = Self.rtpHeaderLength(buffer, end: length - tagLength)
        else { throw record(.badParameter) }
        let ssrc = buffer.loadBigEndianUInt32(at: 8)
        let sequence = buffer.loadBigEndianUInt16(at: 2)
        // Borrowed without a retain and release per packet, as on the send path.
        guard let reference = knownStreamReference(for: ssrc) else {
            return try unprotectRTP(
                buffer, length: length, headerLength: headerLength, ssrc: ssrc, sequence: sequence, nil)
        }
        return try Self.borrowing(reference) { known throws(SRTPError) in
            try unprotectRTP(buffer, length: length, headerLength: headerLength, ssrc: ssrc, sequence: sequence, known)
        }
    }

    private func unprotectRTP(
        _ buffer: UnsafeMutableRawPointer, length: Int, headerLength: Int, ssrc: UInt32, sequence: UInt16,
        _ known: Stream?
    ) throws(SRTPError) -> Int {
        let tagLength = rtp.tagLength
        let index: UInt64
        if let known, known.hasIndex {
            let estimate = estimateSRTPIndex(sequence: sequence, highest: known.highestIndex)
            guard known.rtpWindow?.check(estimate) == .fresh else { throw record(.replayFailed) }
            index = estimate
        } else {
            index = UInt64(sequence)
        }
        let roc = UInt32(truncatingIfNeeded: index >> 16)
        let end = length - tagLength
        let payload = UnsafeMutableRawBufferPointer(start: buffer + headerLength, count: end - headerLength)
        switch profile {
        case .aeadAES128GCM:
            guard
                rtp.openGCM(
                    ssrc: ssrc, rtpROC: roc, low: UInt32(sequence),
                    aad: UnsafeRawBufferPointer(start: buffer, count: headerLength), payload: payload,
                    tag: buffer + end)
            else { throw record(.authFailed) }
        case .aes128CMHMACSHA1_80:
            guard rtp.verify(UnsafeRawBufferPointer(start: buffer, count: end), roc: roc, tag: buffer + end) else {
                throw record(.authFailed)
            }
            guard rtp.applyKeystream(ssrc: ssrc, index: index, payload: payload) else { throw record(.other(-1)) }
        }
        // Only an authentic packet may create or move stream state.
        if let known {
            known.rtpWindow?.accept(index)
            known.advance(to: index)
        } else {
            guard let created = stream(for: ssrc, create: true) else { throw record(.other(0)) }
            created.rtpWindow?.accept(index)
            created.advance(to: index)
        }
        return end
    }

    /// Encrypts and authenticates an RTCP (compound) packet in place.
    /// - Returns: the SRTCP packet length (index and tag appended).
    public func protectRTCP(_ buffer: UnsafeMutableRawPointer, length: Int, capacity: Int)
        throws(SRTPError) -> Int
    {
        guard direction == .outbound, length >= 8, capacity >= length + Self.maxTrailerLength,
            buffer.load(as: UInt8.self) >> 6 == 2
        else { throw record(.badParameter) }
        let ssrc = buffer.loadBigEndianUInt32(at: 4)
        guard let stream = stream(for: ssrc, create: true) else { throw record(.other(0)) }
        let index = stream.nextRTCPIndex
        stream.nextRTCPIndex = (index &+ 1) & 0x7FFF_FFFF
        let indexWord = 0x8000_0000 | index  // E: the packet is encrypted
        let payload = UnsafeMutableRawBufferPointer(start: buffer + 8, count: length - 8)
        switch profile {
        case .aeadAES128GCM:
            let sealed = rtcp.withRTCPAAD(header: buffer, indexWord: indexWord) { aad in
                rtcp.sealGCM(ssrc: ssrc, rtpROC: nil, low: index, aad: aad, payload: payload, tag: buffer + length)
            }
            guard sealed else { throw record(.other(-1)) }
            (buffer + length + 16).storeBigEndianUInt32(indexWord)
            return length + 16 + 4
        case .aes128CMHMACSHA1_80:
            guard rtcp.applyKeystream(ssrc: ssrc, index: UInt64(index), payload: payload) else {
                throw record(.other(-1))
            }
            (buffer + length).storeBigEndianUInt32(indexWord)
            rtcp.authenticate(
                UnsafeRawBufferPointer(start: buffer, count: length + 4), roc: nil, tag: buffer + length + 4)
            return length + 4 + 10
        }
    }

    /// Verifies and decrypts an SRTCP packet in place.
    /// - Returns: the RTCP packet length.
    public func unprotectRTCP(_ buffer: UnsafeMutableRawPointer, length: Int) throws(SRTPError) -> Int {
        let tagLength = rtcp.tagLength
        guard direction == .inbound, length >= 8 + 4 + tagLength, buffer.load(as: UInt8.self) >> 6 == 2 else {
            throw record(.badParameter)
        }
        let ssrc = buffer.loadBigEndianUInt32(at: 4)
        let end: Int
        let indexWord: UInt32
        switch profile {
        case .aeadAES128GCM:
            // header ‖ ciphertext ‖ tag ‖ E·index
            indexWord = buffer.loadBigEndianUInt32(at: length - 4)
            end = length - 4 - tagLength
        case .aes128CMHMACSHA1_80:
            // header ‖ ciphertext ‖ E·index ‖ tag
            indexWord = buffer.loadBigEndianUInt32(at: length - tagLength - 4)
            end = length - tagLength - 4
        }
        let index = indexWord & 0x7FFF_FFFF
        let encrypted = indexWord & 0x8000_0000 != 0
        let known = stream(for: ssrc, create: false)
        if let known, known.rtcpWindow?.check(UInt64(index)) != .fresh { throw record(.replayFailed) }
        switch profile {
        case .aeadAES128GCM:
            let tag = buffer + end
            let opened: Bool
            if encrypted {
                let payload = UnsafeMutableRawBufferPointer(start: buffer + 8, count: end - 8)
                opened = rtcp.withRTCPAAD(header: buffer, indexWord: indexWord) { aad in
                    rtcp.openGCM(ssrc: ssrc, rtpROC: nil, low: index, aad: aad, payload: payload, tag: tag)
                }
            } else {
                // Unencrypted SRTCP: the whole packet and the index word are authenticated data. The
                // index word follows the tag, so move it next to the packet for one AAD run.
                var word = indexWord.bigEndian
                let aadLength = end + 4
                var tagCopy = (UInt64(0), UInt64(0))
                withUnsafeMutableBytes(of: &tagCopy) {
                    $0.copyMemory(from: UnsafeRawBufferPointer(start: tag, count: 16))
                }
                withUnsafeBytes(of: &word) { (buffer + end).copyMemory(from: $0.baseAddress!, byteCount: 4) }
                opened = withUnsafeMutableBytes(of: &tagCopy) { tagBytes in
                    rtcp.openGCM(
                        ssrc: ssrc, rtpROC: nil, low: index,
                        aad: UnsafeRawBufferPointer(start: buffer, count: aadLength),
                        payload: UnsafeMutableRawBufferPointer(start: nil, count: 0), tag: tagBytes.baseAddress!)
                }
            }
            guard opened else { throw record(.authFailed) }
        case .aes128CMHMACSHA1_80:
            guard
                rtcp.verify(
                    UnsafeRawBufferPointer(start: buffer, count: end + 4), roc: nil, tag: buffer + end + 4)
            else { throw record(.authFailed) }
            if encrypted {
                let payload = UnsafeMutableRawBufferPointer(start: buffer + 8, count: end - 8)
                guard rtcp.applyKeystream(ssrc: ssrc, index: UInt64(index), payload: payload) else {
                    throw record(.other(-1))
                }
            }
        }
        guard let stream = known ?? stream(for: ssrc, create: true) else { throw record(.other(0)) }
        stream.rtcpWindow?.accept(UInt64(index))
        return end
    }

    /// Forgets `ssrc` (its index, rollover estimate and replay windows): its stream ended for good,
    /// an SFU consumer closed or a track left its m-line. Without it, a long live stream's
    /// subscriber would reach ``maxStreams`` after some hundreds of stage invites and then could
    /// not protect or accept any new SSRC. Loop thread, between packets.
    public func forget(ssrc: UInt32) {
        guard streams.removeValue(forKey: ssrc) != nil else { return }
        streamReferences[ssrc] = nil
        if recentSSRC0 == ssrc { recentStream0 = nil }
        if recentSSRC1 == ssrc { recentStream1 = nil }
        if recentSSRC2 == ssrc { recentStream2 = nil }
        if recentSSRC3 == ssrc { recentStream3 = nil }
    }

    /// SSRCs with state in this session.
    public var streamCount: Int { streams.count }

    /// ``stream(for:create:)`` (creating) as an unretained reference: a stream is removed only by
    /// ``forget(ssrc:)``, between packets.
    /// An SFU's subscribe session interleaves the SSRCs of several consumers, so the table lookup is
    /// on the per-packet path too; it holds unretained references for that.
    @inline(__always)
    private func knownStreamReference(for ssrc: UInt32) -> Unmanaged<Stream>? {
        if let recent = recentStream(ssrc) { return recent }
        guard let known = streamReferences[ssrc] else { return nil }
        remember(ssrc, known)
        return known
    }

    /// ``knownStreamReference(for:)``, creating the stream when it is new.
    @inline(__always)
    private func streamReference(for ssrc: UInt32) -> Unmanaged<Stream>? {
        if let known = knownStreamReference(for: ssrc) { return known }
        return stream(for: ssrc, create: true).map { Unmanaged.passUnretained($0) }
    }

    private func stream(for ssrc: UInt32, create: Bool) -> Stream? {
        if let recent = recentStream(ssrc) { return recent.takeUnretainedValue() }
        var stream = streams[ssrc]
        if stream == nil {
            guard create, streams.count < Self.maxStreams else { return nil }
            let created = Stream(inbound: direction == .inbound)
            streams[ssrc] = created
            streamReferences[ssrc] = Unmanaged.passUnretained(created)
            stream = created
        }
        if let stream { remember(ssrc, Unmanaged.passUnretained(stream)) }
        return stream
    }

    /// The stream of `ssrc` when it is one of the last four looked up.
    @inline(__always)
    private func recentStream(_ ssrc: UInt32) -> Unmanaged<Stream>? {
        if ssrc == recentSSRC0, let stream = recentStream0 { return stream }
        if ssrc == recentSSRC1, let stream = recentStream1 { return stream }
        if ssrc == recentSSRC2, let stream = recentStream2 { return stream }
        if ssrc == recentSSRC3, let stream = recentStream3 { return stream }
        return nil
    }

    /// Keeps `stream` among the recent four, in place of the oldest entry.
    private func remember(_ ssrc: UInt32, _ stream: Unmanaged<Stream>) {
        switch recentNext {
        case 0: (recentSSRC0, recentStream0) = (ssrc, stream)
        case 1: (recentSSRC1, recentStream1) = (ssrc, stream)
        case 2: (recentSSRC2, recentStream2) = (ssrc, stream)
        default: (recentSSRC3, recentStream3) = (ssrc, stream)
        }
        recentNext = (recentNext + 1) & 3
    }

    /// Length of the RTP header (fixed part, CSRCs, extension), or nil when it does not fit in
    /// `end` bytes or the version is not 2.
    private static func rtpHeaderLength(_ buffer: UnsafeMutableRawPointer, end: Int) -> Int? {
        guard end >= 12 else { return nil }
        let first = buffer.load(as: UInt8.self)
        guard first >> 6 == 2 else { return nil }
        var length = 12 + 4 * Int(first & 0x0F)
        if first & 0x10 != 0 {
            guard end >= length + 4 else { return nil }
            length += 4 + 4 * Int(buffer.loadBigEndianUInt16(at: length + 2))
        }
        return length <= end ? length : nil
    }

    private func record(_ error: SRTPError) -> SRTPError {
        switch error {
        case .authFailed: authFailures &+= 1
        case .replayFailed: replayFailures &+= 1
        case .badParameter, .other: otherFailures &+= 1
        }
        return error
    }
}

extension UnsafeMutableRawPointer {
    fileprivate func loadBigEndianUInt32(at offset: Int) -> UInt32 {
        (0..<4).reduce(UInt32(0)) { $0 << 8 | UInt32(load(fromByteOffset: offset + $1, as: UInt8.self)) }
    }
    fileprivate func loadBigEndianUInt16(at offset: Int) -> UInt16 {
        UInt16(load(fromByteOffset: offset, as: UInt8.self)) << 8
            | UInt16(load(fromByteOffset: offset + 1, as: UInt8.self))
    }
    fileprivate func storeBigEndianUInt32(_ value: UInt32) {
        for i in 0..<4 {
            storeBytes(of: UInt8(truncatingIfNeeded: value >> (24 - 8 * UInt32(i))), toByteOffset: i, as: UInt8.self)
        }
    }
}

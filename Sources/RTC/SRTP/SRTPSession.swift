import CSRTP

/// Why an SRTP or SRTCP packet could not be protected or unprotected.
public enum SRTPError: Error, Sendable, Hashable {
    /// The authentication tag did not verify (wrong key, corrupted or forged packet).
    case authFailed
    /// The packet index was already seen or is older than the replay window.
    case replayFailed
    /// The packet is too short or malformed, the buffer too small, or the key the wrong size.
    case badParameter
    /// Any other libsrtp status code.
    case other(Int32)

    init(status: srtp_err_status_t) {
        switch status {
        case srtp_err_status_auth_fail: self = .authFailed
        case srtp_err_status_replay_fail, srtp_err_status_replay_old, srtp_err_status_pkt_idx_old:
            self = .replayFailed
        case srtp_err_status_bad_param, srtp_err_status_parse_err: self = .badParameter
        default: self = .other(Int32(bitPattern: status.rawValue))
        }
    }
}

/// One direction of SRTP/SRTCP protection (libsrtp2), for every SSRC of that direction.
///
/// All operations work in place on the caller's buffer and allocate nothing. Confined to the
/// EventLoop thread; not thread-safe.
public final class SRTPSession: @unchecked Sendable {
    /// Which way the packets flow.
    public enum Direction: Sendable, Hashable {
        /// Packets we receive and unprotect (`ssrc_any_inbound`).
        case inbound
        /// Packets we protect and send (`ssrc_any_outbound`).
        case outbound
    }

    /// Spare bytes a buffer needs after the packet for ``protectRTP(_:length:capacity:)`` and ``protectRTCP(_:length:capacity:)``.
    public static let maxTrailerLength = Int(shim_SRTP_MAX_TRAILER_LEN())
    /// Replay window in packets: wide enough that late NACK retransmissions are still accepted.
    public static let replayWindowSize = 1024

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

    private let session: srtp_t

    /// libsrtp wants one global initialisation per process; a static let runs it exactly once.
    private static let libraryStatus: srtp_err_status_t = srtp_init()

    /// Creates a session from a master key and salt.
    /// - Parameters:
    ///   - profile: the negotiated protection profile.
    ///   - key: master key, ``SRTPProfile/keyLength`` bytes.
    ///   - salt: master salt, ``SRTPProfile/saltLength`` bytes.
    ///   - direction: whether this session protects (outbound) or unprotects (inbound).
    public init(profile: SRTPProfile, key: [UInt8], salt: [UInt8], direction: Direction)
        throws(SRTPError)
    {
        guard Self.libraryStatus == srtp_err_status_ok else {
            throw SRTPError(status: Self.libraryStatus)
        }
        guard key.count == profile.keyLength, salt.count == profile.saltLength else {
            throw .badParameter
        }
        self.profile = profile
        self.direction = direction

        var policy = srtp_policy_t()
        switch profile {
        case .aes128CMHMACSHA1_80:
            srtp_crypto_policy_set_rtp_default(&policy.rtp)
            srtp_crypto_policy_set_rtcp_default(&policy.rtcp)
        case .aeadAES128GCM:
            srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtp)
            srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtcp)
        }
        policy.ssrc.type = direction == .inbound ? ssrc_any_inbound : ssrc_any_outbound
        policy.window_size = UInt(Self.replayWindowSize)
        // We resend NACKed packets with their original sequence number.
        policy.allow_repeat_tx = 1
        policy.next = nil

        var masterKey = key + salt  // srtp_create copies it
        var created: srtp_t?
        let status = masterKey.withUnsafeMutableBufferPointer { buffer in
            policy.key = buffer.baseAddress
            return srtp_create(&created, &policy)
        }
        for index in masterKey.indices { masterKey[index] = 0 }
        guard status == srtp_err_status_ok, let created else { throw SRTPError(status: status) }
        session = created
    }

    deinit {
        _ = srtp_dealloc(session)
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
        guard length >= 12, length <= Int(Int32.max) - Self.maxTrailerLength,
            capacity >= length + Self.maxTrailerLength
        else { throw record(.badParameter) }
        var packetLength = Int32(length)
        let status = srtp_protect(session, buffer, &packetLength)
        guard status == srtp_err_status_ok else { throw record(SRTPError(status: status)) }
        return Int(packetLength)
    }

    /// Verifies and decrypts an SRTP packet in place.
    /// - Returns: the RTP packet length (the tag is stripped).
    public func unprotectRTP(_ buffer: UnsafeMutableRawPointer, length: Int) throws(SRTPError) -> Int {
        guard length >= 12, length <= Int(Int32.max) else { throw record(.badParameter) }
        var packetLength = Int32(length)
        let status = srtp_unprotect(session, buffer, &packetLength)
        guard status == srtp_err_status_ok else { throw record(SRTPError(status: status)) }
        return Int(packetLength)
    }

    /// Encrypts and authenticates an RTCP (compound) packet in place.
    /// - Returns: the SRTCP packet length (index and tag appended).
    public func protectRTCP(_ buffer: UnsafeMutableRawPointer, length: Int, capacity: Int)
        throws(SRTPError) -> Int
    {
        guard length >= 8, length <= Int(Int32.max) - Self.maxTrailerLength,
            capacity >= length + Self.maxTrailerLength
        else { throw record(.badParameter) }
        var packetLength = Int32(length)
        let status = srtp_protect_rtcp(session, buffer, &packetLength)
        guard status == srtp_err_status_ok else { throw record(SRTPError(status: status)) }
        return Int(packetLength)
    }

    /// Verifies and decrypts an SRTCP packet in place.
    /// - Returns: the RTCP packet length.
    public func unprotectRTCP(_ buffer: UnsafeMutableRawPointer, length: Int) throws(SRTPError) -> Int {
        // Header (8) + SRTCP index (4) is the least that can be valid.
        guard length >= 12, length <= Int(Int32.max) else { throw record(.badParameter) }
        var packetLength = Int32(length)
        let status = srtp_unprotect_rtcp(session, buffer, &packetLength)
        guard status == srtp_err_status_ok else { throw record(SRTPError(status: status)) }
        return Int(packetLength)
    }

    private func record(_ error: SRTPError) -> SRTPError {
        switch error {
        case .authFailed: authFailures &+= 1
        case .replayFailed: replayFailures &+= 1
        case .badParameter, .other: otherFailures &+= 1
        }
        return error
    }

    /// Bare libsrtp unprotect, for the benchmark anchor (no Swift-side checks or counters).
    func rawUnprotect(_ buffer: UnsafeMutableRawPointer, length: inout Int32) -> srtp_err_status_t {
        srtp_unprotect(session, buffer, &length)
    }
}

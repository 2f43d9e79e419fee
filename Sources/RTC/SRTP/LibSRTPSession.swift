import CSRTP

/// libsrtp, the reference SRTP implementation, kept beside ``SRTPSession`` as its yardstick: the
/// tests run packets between the two in every direction, and the benchmarks use its bare
/// `srtp_unprotect` as the anchor of the receive-path figures (public for them: `Benchmarks`). Not
/// used on the media path.
public final class LibSRTPSession {
    /// libsrtp wants one global initialisation per process; a static let runs it exactly once.
    private static let libraryStatus: srtp_err_status_t = srtp_init()
    /// Room libsrtp may write after a packet (tag, SRTCP index, MKI).
    public static let maxTrailerLength = Int(shim_SRTP_MAX_TRAILER_LEN())

    private let session: srtp_t

    public init?(profile: SRTPProfile, key: [UInt8], salt: [UInt8], direction: SRTPSession.Direction) {
        guard Self.libraryStatus == srtp_err_status_ok, key.count == profile.keyLength,
            salt.count == profile.saltLength
        else { return nil }
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
        policy.window_size = UInt(SRTPSession.replayWindowSize)
        policy.allow_repeat_tx = 1
        policy.next = nil
        var masterKey = key + salt  // srtp_create copies it
        var created: srtp_t?
        let status = masterKey.withUnsafeMutableBufferPointer { buffer in
            policy.key = buffer.baseAddress
            return srtp_create(&created, &policy)
        }
        guard status == srtp_err_status_ok, let created else { return nil }
        session = created
    }

    deinit { _ = srtp_dealloc(session) }

    /// The packet's new length, or nil when libsrtp refuses it.
    func protectRTP(_ buffer: UnsafeMutableRawPointer, length: Int) -> Int? {
        call(length) { srtp_protect(session, buffer, &$0) }
    }
    func unprotectRTP(_ buffer: UnsafeMutableRawPointer, length: Int) -> Int? {
        call(length) { srtp_unprotect(session, buffer, &$0) }
    }
    func protectRTCP(_ buffer: UnsafeMutableRawPointer, length: Int) -> Int? {
        call(length) { srtp_protect_rtcp(session, buffer, &$0) }
    }
    func unprotectRTCP(_ buffer: UnsafeMutableRawPointer, length: Int) -> Int? {
        call(length) { srtp_unprotect_rtcp(session, buffer, &$0) }
    }

    /// Bare `srtp_unprotect`, for the benchmark anchor (no Swift-side checks); whether libsrtp
    /// accepted the packet.
    @inline(__always)
    public func rawUnprotect(_ buffer: UnsafeMutableRawPointer, length: inout Int32) -> Bool {
        srtp_unprotect(session, buffer, &length) == srtp_err_status_ok
    }

    /// Bare `srtp_protect`, for the benchmark's protect row; whether libsrtp protected the packet
    /// (the buffer needs ``maxTrailerLength`` spare bytes).
    @inline(__always)
    public func rawProtect(_ buffer: UnsafeMutableRawPointer, length: inout Int32) -> Bool {
        srtp_protect(session, buffer, &length) == srtp_err_status_ok
    }

    private func call(_ length: Int, _ body: (inout Int32) -> srtp_err_status_t) -> Int? {
        guard length > 0, length < Int(Int32.max) - Self.maxTrailerLength else { return nil }
        var packetLength = Int32(length)
        return body(&packetLength) == srtp_err_status_ok ? Int(packetLength) : nil
    }
}

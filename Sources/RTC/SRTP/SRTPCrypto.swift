import COpenSSL

/// The SRTP key derivation of RFC 3711 §4.3 (AES-CM PRF, key derivation rate 0), also used by
/// the AEAD profiles of RFC 7714. A 12-byte AEAD master salt is padded with zeros to 14 bytes,
/// as libsrtp and browsers do.
enum SRTPKeyDerivation {
    /// The labels of RFC 3711 §4.3.2.
    enum Label: UInt8 {
        case rtpEncryption = 0, rtpAuthentication, rtpSalt
        case rtcpEncryption, rtcpAuthentication, rtcpSalt
    }

    static func derive(masterKey: [UInt8], masterSalt: [UInt8], label: Label, length: Int)
        throws(SRTPError) -> [UInt8]
    {
        guard masterKey.count == 16, masterSalt.count <= 14, length > 0 else { throw .badParameter }
        // x = (label ‖ index DIV kdr) XOR master salt, the label landing on byte 7 of the 112 bits.
        var counterBlock = [UInt8](repeating: 0, count: 16)
        for (i, byte) in masterSalt.enumerated() { counterBlock[i] = byte }
        counterBlock[7] ^= label.rawValue
        guard let context = EVP_CIPHER_CTX_new() else { throw .other(-1) }
        defer { EVP_CIPHER_CTX_free(context) }
        var output = [UInt8](repeating: 0, count: length)
        let zeros = [UInt8](repeating: 0, count: length)
        var written: Int32 = 0
        guard EVP_EncryptInit_ex(context, EVP_aes_128_ctr(), nil, masterKey, counterBlock) == 1,
            EVP_EncryptUpdate(context, &output, &written, zeros, Int32(length)) == 1, written == length
        else { throw .other(-1) }
        return output
    }
}

/// One direction's cipher state for RTP or RTCP: the session keys of one profile, ready to use
/// on every packet without allocating.
final class SRTPCipher {
    let profile: SRTPProfile
    /// AES-128-GCM or AES-128-CTR, keyed once.
    private let context: OpaquePointer
    /// The session salt (14 bytes for AES-CM, 12 for GCM).
    let salt: [UInt8]
    /// HMAC-SHA1 key schedule (AES-CM only).
    private var authentication = shim_hmac_sha1_key()
    /// Scratch for the IV, digests and SRTCP AAD, then the session salt, allocated once: a packet
    /// allocates nothing, and raw memory spares the per-access uniqueness checks of arrays on the
    /// hot path. One cache line: an SFU protects for a hundred subscribers in turn, each cipher's
    /// state cold by then, so every separate line costs a miss per packet.
    private let scratch = UnsafeMutableRawPointer.allocate(byteCount: 64, alignment: 64)
        .bindMemory(to: UInt8.self, capacity: 64)
    private var iv: UnsafeMutablePointer<UInt8> { scratch }
    private var digest: UnsafeMutablePointer<UInt8> { scratch + 16 }
    private var aad: UnsafeMutablePointer<UInt8> { scratch + 36 }
    private var saltBytes: UnsafeMutablePointer<UInt8> { scratch + 48 }

    /// Bytes the authentication tag adds.
    var tagLength: Int { profile == .aeadAES128GCM ? 16 : 10 }

    init(profile: SRTPProfile, masterKey: [UInt8], masterSalt: [UInt8], rtcp: Bool, encrypt: Bool)
        throws(SRTPError)
    {
        self.profile = profile
        let labels: (SRTPKeyDerivation.Label, SRTPKeyDerivation.Label, SRTPKeyDerivation.Label) =
            rtcp
            ? (.rtcpEncryption, .rtcpAuthentication, .rtcpSalt) : (.rtpEncryption, .rtpAuthentication, .rtpSalt)
        var key = try SRTPKeyDerivation.derive(
            masterKey: masterKey, masterSalt: masterSalt, label: labels.0, length: 16)
        defer { for i in key.indices { key[i] = 0 } }
        salt = try SRTPKeyDerivation.derive(
            masterKey: masterKey, masterSalt: masterSalt, label: labels.2,
            length: profile == .aeadAES128GCM ? 12 : 14)
        scratch.initialize(repeating: 0, count: 64)
        for (i, byte) in salt.enumerated() { scratch[48 + i] = byte }
        guard let context = EVP_CIPHER_CTX_new() else { throw .other(-1) }
        let cipher = profile == .aeadAES128GCM ? EVP_aes_128_gcm() : EVP_aes_128_ctr()
        guard EVP_CipherInit_ex(context, cipher, nil, key, nil, encrypt ? 1 : 0) == 1 else {
            EVP_CIPHER_CTX_free(context)
            throw .other(-1)
        }
        self.context = context
        if profile == .aes128CMHMACSHA1_80 {
            var authKey = try SRTPKeyDerivation.derive(
                masterKey: masterKey, masterSalt: masterSalt, label: labels.1, length: 20)
            shim_hmac_sha1_key_init(&authentication, authKey, authKey.count)
            for i in authKey.indices { authKey[i] = 0 }
        }
    }

    deinit {
        scratch.deallocate()
        EVP_CIPHER_CTX_free(context)
        withUnsafeMutableBytes(of: &authentication) { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) }
    }

    // MARK: AES-128-GCM (RFC 7714)

    /// Sets the 12-byte GCM IV: (00 00 ‖ SSRC ‖ high ‖ low) XOR salt, where high/low are
    /// ROC/sequence (RTP, 4 + 2 bytes) or 0/SRTCP index (RTCP, 2 + 4 bytes).
    private func setGCMIV(ssrc: UInt32, rtpROC: UInt32?, low: UInt32) {
        iv[0] = 0
        iv[1] = 0
        iv.storeBigEndian(ssrc, at: 2)
        if let roc = rtpROC {
            iv.storeBigEndian(roc, at: 6)
            iv[10] = UInt8(truncatingIfNeeded: low >> 8)
            iv[11] = UInt8(truncatingIfNeeded: low)
        } else {
            iv[6] = 0
            iv[7] = 0
            iv.storeBigEndian(low, at: 8)
        }
        for i in 0..<12 { iv[i] ^= saltBytes[i] }
    }

    /// Encrypts `payload` in place with `aad` authenticated, writing the 16-byte tag at `tag`.
    func sealGCM(
        ssrc: UInt32, rtpROC: UInt32?, low: UInt32, aad: UnsafeRawBufferPointer,
        payload: UnsafeMutableRawBufferPointer, tag: UnsafeMutableRawPointer
    ) -> Bool {
        setGCMIV(ssrc: ssrc, rtpROC: rtpROC, low: low)
        var written: Int32 = 0
        guard EVP_EncryptInit_ex(context, nil, nil, nil, iv) == 1,
            EVP_EncryptUpdate(context, nil, &written, aad.baseAddress, Int32(aad.count)) == 1
        else { return false }
        if let base = payload.baseAddress, payload.count > 0 {
            let bytes = base.assumingMemoryBound(to: UInt8.self)
            guard EVP_EncryptUpdate(context, bytes, &written, bytes, Int32(payload.count)) == 1 else {
                return false
            }
        }
        return EVP_EncryptFinal_ex(context, digest, &written) == 1
            && EVP_CIPHER_CTX_ctrl(context, shim_EVP_CTRL_GCM_GET_TAG(), 16, tag) == 1
    }

    /// Verifies the tag and decrypts `payload` in place. On failure the payload is garbage.
    func openGCM(
        ssrc: UInt32, rtpROC: UInt32?, low: UInt32, aad: UnsafeRawBufferPointer,
        payload: UnsafeMutableRawBufferPointer, tag: UnsafeMutableRawPointer
    ) -> Bool {
        setGCMIV(ssrc: ssrc, rtpROC: rtpROC, low: low)
        var written: Int32 = 0
        guard EVP_DecryptInit_ex(context, nil, nil, nil, iv) == 1,
            EVP_DecryptUpdate(context, nil, &written, aad.baseAddress, Int32(aad.count)) == 1
        else { return false }
        if let base = payload.baseAddress, payload.count > 0 {
            let bytes = base.assumingMemoryBound(to: UInt8.self)
            guard EVP_DecryptUpdate(context, bytes, &written, bytes, Int32(payload.count)) == 1 else {
                return false
            }
        }
        guard EVP_CIPHER_CTX_ctrl(context, shim_EVP_CTRL_GCM_SET_TAG(), 16, tag) == 1 else { return false }
        return EVP_DecryptFinal_ex(context, digest, &written) > 0
    }

    /// The 12 bytes of SRTCP AAD: the first 8 header bytes and E ‖ SRTCP index.
    func withRTCPAAD<R>(header: UnsafeRawPointer, indexWord: UInt32, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        for i in 0..<8 { aad[i] = header.load(fromByteOffset: i, as: UInt8.self) }
        aad.storeBigEndian(indexWord, at: 8)
        return body(UnsafeRawBufferPointer(start: aad, count: 12))
    }

    // MARK: AES-128-CM + HMAC-SHA1-80 (RFC 3711)

    /// XORs the AES-CM keystream for (SSRC, index) into `payload`.
    func applyKeystream(ssrc: UInt32, index: UInt64, payload: UnsafeMutableRawBufferPointer) -> Bool {
        guard let base = payload.baseAddress, payload.count > 0 else { return true }
        // IV = salt·2^16 XOR SSRC·2^64 XOR index·2^16.
        for i in 0..<14 { iv[i] = saltBytes[i] }
        iv[14] = 0
        iv[15] = 0
        for i in 0..<4 { iv[4 + i] ^= UInt8(truncatingIfNeeded: ssrc >> (24 - 8 * UInt32(i))) }
        for i in 0..<6 { iv[8 + i] ^= UInt8(truncatingIfNeeded: index >> (40 - 8 * UInt64(i))) }
        var written: Int32 = 0
        let bytes = base.assumingMemoryBound(to: UInt8.self)
        return EVP_CipherInit_ex(context, nil, nil, nil, iv, -1) == 1
            && EVP_CipherUpdate(context, bytes, &written, bytes, Int32(payload.count)) == 1
    }

    /// Writes the 10-byte HMAC-SHA1-80 tag of `data` (followed by `roc` for RTP) to `tag`.
    func authenticate(_ data: UnsafeRawBufferPointer, roc: UInt32?, tag: UnsafeMutableRawPointer) {
        computeDigest(data, roc: roc)
        for i in 0..<10 { tag.storeBytes(of: digest[i], toByteOffset: i, as: UInt8.self) }
    }

    /// True when the 10-byte tag at `tag` is the HMAC of `data` (and `roc`); constant time.
    func verify(_ data: UnsafeRawBufferPointer, roc: UInt32?, tag: UnsafeRawPointer) -> Bool {
        computeDigest(data, roc: roc)
        var difference: UInt8 = 0
        for i in 0..<10 { difference |= digest[i] ^ tag.load(fromByteOffset: i, as: UInt8.self) }
        return difference == 0
    }

    private func computeDigest(_ data: UnsafeRawBufferPointer, roc: UInt32?) {
        var suffix = (roc ?? 0).bigEndian
        withUnsafeBytes(of: &suffix) { suffixBytes in
            shim_hmac_sha1(
                &authentication, data.baseAddress, data.count, suffixBytes.baseAddress,
                roc == nil ? 0 : 4, digest)
        }
    }
}

extension UnsafeMutablePointer<UInt8> {
    fileprivate func storeBigEndian(_ value: UInt32, at offset: Int) {
        self[offset] = UInt8(truncatingIfNeeded: value >> 24)
        self[offset + 1] = UInt8(truncatingIfNeeded: value >> 16)
        self[offset + 2] = UInt8(truncatingIfNeeded: value >> 8)
        self[offset + 3] = UInt8(truncatingIfNeeded: value)
    }
}

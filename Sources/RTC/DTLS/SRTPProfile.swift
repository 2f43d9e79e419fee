/// An SRTP protection profile negotiated through the DTLS `use_srtp` extension (RFC 5764, RFC 7714).
public enum SRTPProfile: Sendable, Hashable, CaseIterable {
    /// `SRTP_AES128_CM_HMAC_SHA1_80`: AES-CM with an 80-bit HMAC-SHA1 tag.
    case aes128CMHMACSHA1_80
    /// `SRTP_AEAD_AES_128_GCM`: AES-128-GCM with a 16-byte tag. Much cheaper per packet here.
    case aeadAES128GCM

    /// The profile name as OpenSSL's `SSL_CTX_set_tlsext_use_srtp` expects it.
    public var opensslName: String {
        switch self {
        case .aes128CMHMACSHA1_80: "SRTP_AES128_CM_SHA1_80"
        case .aeadAES128GCM: "SRTP_AEAD_AES_128_GCM"
        }
    }

    /// The IANA DTLS-SRTP protection profile identifier.
    public var protectionProfileID: UInt {
        switch self {
        case .aes128CMHMACSHA1_80: 0x0001
        case .aeadAES128GCM: 0x0007
        }
    }

    /// Master key length in bytes.
    public var keyLength: Int { 16 }

    /// Master salt length in bytes (14 for AES-CM, 12 for GCM).
    public var saltLength: Int {
        switch self {
        case .aes128CMHMACSHA1_80: 14
        case .aeadAES128GCM: 12
        }
    }

    /// Finds the profile for an IANA identifier, if we support it.
    public init?(protectionProfileID: UInt) {
        guard
            let match = SRTPProfile.allCases.first(where: {
                $0.protectionProfileID == protectionProfileID
            })
        else { return nil }
        self = match
    }
}

/// SRTP master keys and salts exported from a finished DTLS handshake, already split into
/// our sending half (`local…`) and the peer's sending half (`remote…`).
public struct SRTPKeyingMaterial: Sendable, Hashable {
    /// The negotiated protection profile.
    public var profile: SRTPProfile
    /// Master key we protect outgoing packets with.
    public var localKey: [UInt8]
    /// Master salt we protect outgoing packets with.
    public var localSalt: [UInt8]
    /// Master key the peer protects its packets with (we unprotect with it).
    public var remoteKey: [UInt8]
    /// Master salt the peer protects its packets with.
    public var remoteSalt: [UInt8]

    /// Creates keying material from explicit halves.
    public init(
        profile: SRTPProfile, localKey: [UInt8], localSalt: [UInt8], remoteKey: [UInt8],
        remoteSalt: [UInt8]
    ) {
        self.profile = profile
        self.localKey = localKey
        self.localSalt = localSalt
        self.remoteKey = remoteKey
        self.remoteSalt = remoteSalt
    }

    /// Splits the output of `SSL_export_keying_material("EXTRACTOR-dtls_srtp")`, laid out as
    /// client key ‖ server key ‖ client salt ‖ server salt (RFC 5764 §4.2).
    /// Returns nil when `exported` has the wrong length for `profile`.
    public init?(profile: SRTPProfile, exported: [UInt8], isClient: Bool) {
        let keyLength = profile.keyLength
        let saltLength = profile.saltLength
        guard exported.count == 2 * (keyLength + saltLength) else { return nil }
        let clientKey = Array(exported[0..<keyLength])
        let serverKey = Array(exported[keyLength..<(2 * keyLength)])
        let clientSalt = Array(exported[(2 * keyLength)..<(2 * keyLength + saltLength)])
        let serverSalt = Array(
            exported[(2 * keyLength + saltLength)..<(2 * keyLength + 2 * saltLength)])
        self.profile = profile
        if isClient {
            (localKey, localSalt, remoteKey, remoteSalt) = (clientKey, clientSalt, serverKey, serverSalt)
        } else {
            (localKey, localSalt, remoteKey, remoteSalt) = (serverKey, serverSalt, clientKey, clientSalt)
        }
    }
}

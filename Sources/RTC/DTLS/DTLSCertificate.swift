import COpenSSL
import Synchronization

/// Errors from the DTLS layer.
public enum DTLSError: Error, Sendable, Hashable {
    /// OpenSSL refused to set something up (context, key, certificate, BIO).
    case setupFailed(String)
    /// The handshake failed: a fatal alert was sent or received, or the peer is not speaking DTLS 1.2.
    case handshakeFailed(String)
    /// The peer's certificate does not hash to the fingerprint signalled in SDP.
    case fingerprintMismatch
    /// The handshake did not finish within the allowed time, or retransmissions ran out.
    case timeout
    /// The peer negotiated no SRTP profile we offered, or key export failed.
    case srtpNegotiationFailed(String)
}

/// A certificate fingerprint as carried in SDP `a=fingerprint:` (RFC 8122).
public struct DTLSFingerprint: Sendable, Hashable, CustomStringConvertible {
    /// Why a fingerprint string could not be parsed.
    public enum ParseError: Error, Sendable, Hashable {
        /// The hash function is not one we can compute.
        case unsupportedAlgorithm(String)
        /// The value is not colon-separated pairs of hex digits of the right count.
        case malformedValue
    }

    /// Hash function name, lowercase (for example `"sha-256"`).
    public var algorithm: String
    /// Digest as uppercase hex pairs separated by colons.
    public var value: String

    /// Hash functions we can compute, with their digest lengths in bytes.
    static let digestLengths: [String: Int] = [
        "sha-1": 20, "sha-224": 28, "sha-256": 32, "sha-384": 48, "sha-512": 64,
    ]

    /// Parses an algorithm and value, tolerating any letter case and surrounding whitespace.
    public init(algorithm: String, value: String) throws(ParseError) {
        let normalizedAlgorithm = algorithm.trimmingASCIIWhitespace().lowercased()
        guard let digestLength = Self.digestLengths[normalizedAlgorithm] else {
            throw .unsupportedAlgorithm(normalizedAlgorithm)
        }
        let pairs = value.trimmingASCIIWhitespace().split(
            separator: ":", omittingEmptySubsequences: false)
        guard pairs.count == digestLength else { throw .malformedValue }
        for pair in pairs {
            guard pair.utf8.count == 2, pair.utf8.allSatisfy({ $0.isASCIIHexDigit }) else {
                throw .malformedValue
            }
        }
        self.algorithm = normalizedAlgorithm
        self.value = pairs.map { $0.uppercased() }.joined(separator: ":")
    }

    /// Parses the SDP attribute value form `"sha-256 AB:CD:…"`.
    public init(sdpValue: String) throws(ParseError) {
        let parts = sdpValue.trimmingASCIIWhitespace().split(whereSeparator: { $0 == " " || $0 == "\t" }
        )
        guard parts.count == 2 else { throw .malformedValue }
        try self.init(algorithm: String(parts[0]), value: String(parts[1]))
    }

    /// Builds a fingerprint from raw digest bytes.
    init(algorithm: String, digest: some Sequence<UInt8>) {
        self.algorithm = algorithm
        self.value = digest.map { byte in
            let hex = String(byte, radix: 16, uppercase: true)
            return hex.count == 1 ? "0" + hex : hex
        }.joined(separator: ":")
    }

    /// The SDP attribute value form, `"sha-256 AB:CD:…"`.
    public var sdpValue: String { "\(algorithm) \(value)" }

    public var description: String { sdpValue }

    /// True when both name the same hash function and digest, ignoring letter case.
    public func matches(_ other: DTLSFingerprint) -> Bool {
        algorithm.lowercased() == other.algorithm.lowercased()
            && value.uppercased() == other.value.uppercased()
    }

    /// Hashes a certificate with `algorithm`; nil when the algorithm is unsupported or hashing fails.
    static func of(certificate: OpaquePointer, algorithm: String) -> DTLSFingerprint? {
        let digestFunction: OpaquePointer?
        switch algorithm.lowercased() {
        case "sha-1": digestFunction = EVP_sha1()
        case "sha-224": digestFunction = EVP_sha224()
        case "sha-256": digestFunction = EVP_sha256()
        case "sha-384": digestFunction = EVP_sha384()
        case "sha-512": digestFunction = EVP_sha512()
        default: digestFunction = nil
        }
        guard let digestFunction else { return nil }
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard X509_digest(certificate, digestFunction, &digest, &length) == 1 else { return nil }
        return DTLSFingerprint(algorithm: algorithm.lowercased(), digest: digest.prefix(Int(length)))
    }
}

extension UInt8 {
    fileprivate var isASCIIHexDigit: Bool {
        (0x30...0x39).contains(self) || (0x41...0x46).contains(self) || (0x61...0x66).contains(self)
    }
}

extension String {
    fileprivate func trimmingASCIIWhitespace() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }
        guard let first = firstIndex(where: { !isSpace($0) }),
            let last = lastIndex(where: { !isSpace($0) })
        else {
            return ""
        }
        return String(self[first...last])
    }
}

/// A self-signed ECDSA P-256 certificate and its private key, used as our DTLS identity.
///
/// Immutable after creation, so it may be shared between peer connections and threads.
// Safe: immutable after creation (see above); the shared SSL context is built under a Mutex.
public final class DTLSCertificate: @unchecked Sendable {
    /// OpenSSL `X509*`.
    let x509: OpaquePointer
    /// OpenSSL `EVP_PKEY*`.
    let privateKey: OpaquePointer
    /// SHA-256 fingerprint of the DER certificate, for SDP `a=fingerprint:`.
    public let fingerprint: DTLSFingerprint

    /// One configured `SSL_CTX*` per list of SRTP profiles, shared by every transport that uses this
    /// certificate: a context costs about 12 KB, which a server with a thousand connections would
    /// otherwise pay a thousand times. OpenSSL reference-counts it (each `SSL` holds a reference)
    /// and allows `SSL_new` on one context from several threads.
    private let contexts = Mutex<[[SRTPProfile]: OpaquePointer]>([:])

    private init(x509: OpaquePointer, privateKey: OpaquePointer, fingerprint: DTLSFingerprint) {
        self.x509 = x509
        self.privateKey = privateKey
        self.fingerprint = fingerprint
    }

    deinit {
        contexts.withLock { contexts in
            for context in contexts.values { SSL_CTX_free(context) }
        }
        X509_free(x509)
        EVP_PKEY_free(privateKey)
    }

    /// The shared DTLS context for `profiles`, created and configured on first use.
    /// The caller must not free it; `SSL_new` takes its own reference.
    func dtlsContext(profiles: [SRTPProfile]) throws(DTLSError) -> OpaquePointer {
        try contexts.withLock { (contexts) throws(DTLSError) -> OpaquePointer in
            if let context = contexts[profiles] { return context }
            ERR_clear_error()
            guard let context = SSL_CTX_new(DTLS_method()) else {
                throw .setupFailed("SSL_CTX_new: \(openSSLErrors())")
            }
            do throws(DTLSError) {
                try DTLSTransport.configure(context: context, certificate: self, profiles: profiles)
            } catch {
                SSL_CTX_free(context)
                throw error
            }
            contexts[profiles] = context
            return context
        }
    }

    /// Number of DTLS contexts this certificate holds (one per profile list in use).
    var dtlsContextCount: Int { contexts.withLock { $0.count } }

    /// Generates a fresh ECDSA P-256 key and a self-signed certificate (CN "understudy", random
    /// serial, valid from 30 days ago to one year ahead so that clock skew does not matter).
    public static func generate(commonName: String = "understudy") throws -> DTLSCertificate {
        guard let key = shim_EVP_EC_gen_P256() else {
            throw DTLSError.setupFailed("EC key generation: \(openSSLErrors())")
        }
        guard let x509 = X509_new() else {
            EVP_PKEY_free(key)
            throw DTLSError.setupFailed("X509_new")
        }
        func fail(_ step: String) -> DTLSError {
            X509_free(x509)
            EVP_PKEY_free(key)
            return .setupFailed("\(step): \(openSSLErrors())")
        }
        guard X509_set_version(x509, 2) == 1 else { throw fail("X509_set_version") }

        // 63 random bits keep the serial positive and unique enough for self-signed use.
        guard let serial = BN_new() else { throw fail("BN_new") }
        defer { BN_free(serial) }
        guard BN_rand(serial, 63, -1, 0) == 1,
            BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(x509)) != nil
        else { throw fail("serial") }

        let day = 24 * 3600
        guard shim_X509_set_notBefore_offset(x509, -30 * day) == 1,
            shim_X509_set_notAfter_offset(x509, 365 * day) == 1
        else { throw fail("validity") }

        guard let name = X509_get_subject_name(x509),
            X509_NAME_add_entry_by_txt(name, "CN", shim_MBSTRING_ASC(), commonName, -1, -1, 0) == 1,
            X509_set_issuer_name(x509, name) == 1
        else { throw fail("name") }

        guard X509_set_pubkey(x509, key) == 1 else { throw fail("X509_set_pubkey") }
        guard X509_sign(x509, key, EVP_sha256()) > 0 else { throw fail("X509_sign") }
        guard let fingerprint = DTLSFingerprint.of(certificate: x509, algorithm: "sha-256") else {
            throw fail("fingerprint")
        }
        return DTLSCertificate(x509: x509, privateKey: key, fingerprint: fingerprint)
    }
}

/// Drains OpenSSL's thread-local error queue into one readable line.
func openSSLErrors() -> String {
    var messages: [String] = []
    while true {
        let code = ERR_get_error()
        if code == 0 { break }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        messages.append(
            String(
                decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }
    return messages.isEmpty ? "no OpenSSL error" : messages.joined(separator: "; ")
}

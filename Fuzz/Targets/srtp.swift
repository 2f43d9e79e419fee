// library: SRTP
@testable import SRTP

/// libFuzzer entry for SRTP/SRTCP. The first byte picks the profile and what to do with the rest:
/// unprotect it as received SRTP or SRTCP (what a peer controls before authentication: header,
/// extension and trailer lengths, index and replay state), or protect it as a plain RTP/RTCP
/// packet and require that a fresh receiver opens it back to the same bytes.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  guard size > 0 else { return 0 }
  let mode = data[0]
  let profile: SRTPProfile = mode & 1 == 0 ? .aeadAES128GCM : .aes128CMHMACSHA1_80
  let key = (0..<profile.keyLength).map { UInt8(truncatingIfNeeded: $0 &* 11 &+ 1) }
  let salt = (0..<profile.saltLength).map { UInt8(truncatingIfNeeded: $0 &* 17 &+ 3) }
  let body = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
  var buffer = body + [UInt8](repeating: 0, count: SRTPSession.maxTrailerLength)
  guard let inbound = try? SRTPSession(profile: profile, key: key, salt: salt, direction: .inbound) else {
    fatalError("SRTP: session setup failed")
  }
  let length = body.count
  switch (mode >> 1) % 3 {
  case 0:
    // Received SRTP, twice: the second time is a replay if the first was accepted.
    let first = buffer.withUnsafeMutableBytes { try? inbound.unprotectRTP($0.baseAddress!, length: length) }
    precondition(first == nil || first! <= length)
    var again = body + [UInt8](repeating: 0, count: SRTPSession.maxTrailerLength)
    _ = again.withUnsafeMutableBytes { try? inbound.unprotectRTP($0.baseAddress!, length: length) }
  case 1:
    let opened = buffer.withUnsafeMutableBytes { try? inbound.unprotectRTCP($0.baseAddress!, length: length) }
    precondition(opened == nil || opened! <= length)
  default:
    guard let outbound = try? SRTPSession(profile: profile, key: key, salt: salt, direction: .outbound) else {
      fatalError("SRTP: session setup failed")
    }
    let isRTCP = length > 1 && (192...223).contains(body[1])
    let capacity = buffer.count
    let sealed = buffer.withUnsafeMutableBytes { bytes in
      isRTCP
        ? try? outbound.protectRTCP(bytes.baseAddress!, length: length, capacity: capacity)
        : try? outbound.protectRTP(bytes.baseAddress!, length: length, capacity: capacity)
    }
    guard let sealed else { return 0 }
    precondition(sealed > length && sealed <= length + SRTPSession.maxTrailerLength)
    let opened = buffer.withUnsafeMutableBytes { bytes in
      isRTCP
        ? try? inbound.unprotectRTCP(bytes.baseAddress!, length: sealed)
        : try? inbound.unprotectRTP(bytes.baseAddress!, length: sealed)
    }
    guard opened == length, Array(buffer[0..<length]) == body else {
      fatalError("SRTP: a protected packet did not open to the original")
    }
  }
  return 0
}

import Glibc
import RTCWire

/// An IPv4 or IPv6 UDP endpoint, stored as raw `sockaddr` bytes so that comparing, hashing and
/// handing it to `sendmmsg` never allocates.
public struct SocketAddress: Hashable, Sendable, CustomStringConvertible {
    /// Room for a `sockaddr_in6` (28 bytes), zero-padded.
    @usableFromInline var storage: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    /// The meaningful prefix of `storage` (`socklen_t`).
    @usableFromInline var length: UInt32 = 0

    /// Parses a numeric IPv4 (`"127.0.0.1"`) or IPv6 (`"::1"`) address; nil for anything else,
    /// including host names.
    public init?(ip: String, port: UInt16) {
        var v4 = in_addr()
        if inet_pton(AF_INET, ip, &v4) == 1 {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr = v4
            self.init(copying: &address, length: MemoryLayout<sockaddr_in>.size)
            return
        }
        var v6 = in6_addr()
        // Strip an IPv6 zone ("fe80::1%eth0") which inet_pton refuses; the scope is not kept.
        let bare = ip.split(separator: "%", maxSplits: 1).first.map(String.init) ?? ip
        if inet_pton(AF_INET6, bare, &v6) == 1 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            address.sin6_addr = v6
            self.init(copying: &address, length: MemoryLayout<sockaddr_in6>.size)
            return
        }
        return nil
    }

    /// Copies a kernel-provided `sockaddr`; nil unless it is a complete AF_INET or AF_INET6 address.
    init?(raw: UnsafeRawPointer, length: Int) {
        guard length >= MemoryLayout<sa_family_t>.size else { return nil }
        let family = Int32(raw.loadUnaligned(as: sa_family_t.self))
        if family == AF_INET, length >= MemoryLayout<sockaddr_in>.size {
            var address = raw.loadUnaligned(as: sockaddr_in.self)
            address.sin_zero = (0, 0, 0, 0, 0, 0, 0, 0)
            self.init(copying: &address, length: MemoryLayout<sockaddr_in>.size)
        } else if family == AF_INET6, length >= MemoryLayout<sockaddr_in6>.size {
            var address = raw.loadUnaligned(as: sockaddr_in6.self)
            address.sin6_flowinfo = 0  // not part of the endpoint's identity
            self.init(copying: &address, length: MemoryLayout<sockaddr_in6>.size)
        } else {
            return nil
        }
    }

    private init<T>(copying address: inout T, length: Int) {
        self.length = UInt32(length)
        withUnsafeMutableBytes(of: &storage) { target in
            withUnsafeBytes(of: &address) { source in
                target.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[0..<length]))
            }
        }
    }

    /// Converts a STUN XOR-MAPPED-ADDRESS value.
    public init?(_ stun: STUNAddress) {
        var text = ""
        switch stun.family {
        case .ipv4:
            text = stun.address.map { String($0) }.joined(separator: ".")
        case .ipv6:
            text = stride(from: 0, to: 16, by: 2).map {
                String(UInt16(stun.address[$0]) << 8 | UInt16(stun.address[$0 + 1]), radix: 16)
            }.joined(separator: ":")
        }
        self.init(ip: text, port: stun.port)
    }

    /// True for IPv6.
    public var isIPv6: Bool { family == AF_INET6 }

    var family: Int32 {
        withUnsafeBytes(of: storage) { Int32($0.loadUnaligned(as: sa_family_t.self)) }
    }

    /// The UDP port.
    public var port: UInt16 {
        // sin_port and sin6_port share offset 2.
        withUnsafeBytes(of: storage) { UInt16(bigEndian: $0.loadUnaligned(fromByteOffset: 2, as: UInt16.self)) }
    }

    /// The numeric address, as `inet_ntop` prints it.
    public var ip: String {
        withUnsafeBytes(of: storage) { raw -> String in
            var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
            let isV6 = family == AF_INET6
            // sin_addr is at offset 4, sin6_addr at offset 8.
            let source = raw.baseAddress!.advanced(by: isV6 ? 8 : 4)
            guard inet_ntop(isV6 ? AF_INET6 : AF_INET, source, &buffer, socklen_t(buffer.count)) != nil else {
                return "?"
            }
            return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }

    /// The raw address bytes (4 or 16) in network order.
    public var addressBytes: [UInt8] {
        withUnsafeBytes(of: storage) { raw in
            family == AF_INET6 ? Array(raw[8..<24]) : Array(raw[4..<8])
        }
    }

    /// The address as a STUN XOR-MAPPED-ADDRESS value.
    public var stunAddress: STUNAddress? {
        STUNAddress(family: isIPv6 ? .ipv6 : .ipv4, port: port, address: addressBytes)
    }

    public var description: String {
        isIPv6 ? "[\(ip)]:\(port)" : "\(ip):\(port)"
    }

    /// Calls `body` with a pointer to the `sockaddr` and its length.
    func withSockAddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) throws -> R) rethrows -> R {
        try withUnsafeBytes(of: storage) { raw in
            try body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(length))
        }
    }

    /// Copies the `sockaddr` into `target` (at least 32 bytes) and returns its length.
    @inline(__always)
    func copy(to target: UnsafeMutableRawPointer) -> socklen_t {
        withUnsafeBytes(of: storage) { target.copyMemory(from: $0.baseAddress!, byteCount: 32) }
        return socklen_t(length)
    }

    public static func == (lhs: SocketAddress, rhs: SocketAddress) -> Bool {
        lhs.length == rhs.length && lhs.storage.0 == rhs.storage.0 && lhs.storage.1 == rhs.storage.1
            && lhs.storage.2 == rhs.storage.2 && lhs.storage.3 == rhs.storage.3
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(length)
        hasher.combine(storage.0)
        hasher.combine(storage.1)
        hasher.combine(storage.2)
        hasher.combine(storage.3)
    }
}

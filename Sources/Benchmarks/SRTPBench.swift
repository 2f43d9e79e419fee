import RTC

/// Measures the anchor for the performance goals: bare libsrtp `srtp_unprotect` (and
/// `srtp_protect`) cost, and the same for our ``SRTPSession`` so that the two can be compared in
/// one run.
public enum SRTPBench {
    /// Which SRTP code to time.
    public enum Implementation: Sendable {
        /// libsrtp's bare `srtp_unprotect` (the anchor).
        case libsrtp
        /// ``SRTPSession/unprotectRTP(_:length:)`` (or ``SRTPSession/protectRTP(_:length:capacity:)``),
        /// which the media path uses.
        case understudy
    }

    /// Nanoseconds per packet for `srtp_protect` (or our `protectRTP`) of `count` distinct RTP
    /// packets with a `payloadSize`-byte payload, each with its own sequence number. The plaintext
    /// is copied in before timing; only the protect calls are timed (thread CPU time). The best of
    /// three rounds (fresh session each) is returned, or `.nan` if anything fails.
    public static func protectCost(
        profile: SRTPProfile, payloadSize: Int, count: Int, implementation: Implementation = .libsrtp
    ) -> Double {
        guard let shape = Workload(profile: profile, payloadSize: payloadSize, count: count) else { return .nan }
        let (rtpLength, slot) = (shape.rtpLength, shape.slot)
        var plain = [UInt8](repeating: 0, count: slot * count)
        plain.withUnsafeMutableBytes { all in
            for index in 0..<count {
                writePacket(all.baseAddress! + index * slot, index: index, rtpLength: rtpLength)
            }
        }
        return bestOfThreeRounds(
            packets: plain, count: count, slot: slot, workload: shape, direction: .outbound
        ) { reference, ours, packet, _ in
            switch implementation {
            case .libsrtp:
                var length = Int32(rtpLength)
                return reference.rawProtect(packet, length: &length)
            case .understudy:
                return (try? ours.protectRTP(packet, length: rtpLength, capacity: slot)) != nil
            }
        }
    }

    /// The keys and packet layout both cost functions use: a fixed key and salt, one slot per
    /// packet with room for the SRTP trailer.
    private struct Workload {
        let profile: SRTPProfile
        let key: [UInt8]
        let salt: [UInt8]
        let rtpLength: Int
        let slot: Int

        init?(profile: SRTPProfile, payloadSize: Int, count: Int) {
            guard count > 0, payloadSize >= 0, payloadSize <= 1400 else { return nil }
            self.profile = profile
            key = (0..<profile.keyLength).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
            salt = (0..<profile.saltLength).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) }
            rtpLength = 12 + payloadSize
            slot = rtpLength + LibSRTPSession.maxTrailerLength
        }
    }

    /// One RTP packet of the benchmarks: version 2, payload type 96, sequence `index`, SSRC
    /// 0x12345678, a payload pattern that depends on `index`.
    private static func writePacket(_ packet: UnsafeMutableRawPointer, index: Int, rtpLength: Int) {
        let bytes = packet.assumingMemoryBound(to: UInt8.self)
        bytes[0] = 0x80
        bytes[1] = 96
        bytes[2] = UInt8(truncatingIfNeeded: index >> 8)
        bytes[3] = UInt8(truncatingIfNeeded: index)
        let timestamp = UInt32(truncatingIfNeeded: index &* 3000)
        for shift in 0..<4 {
            bytes[4 + shift] = UInt8(truncatingIfNeeded: timestamp >> (24 - 8 * shift))
        }
        bytes[8] = 0x12
        bytes[9] = 0x34
        bytes[10] = 0x56
        bytes[11] = 0x78
        for offset in 12..<rtpLength { bytes[offset] = UInt8(truncatingIfNeeded: offset &+ index) }
    }

    /// Nanoseconds per packet for `srtp_unprotect` of `count` distinct RTP packets with a
    /// `payloadSize`-byte payload. Packets are protected and copied before timing; only the
    /// unprotect calls are timed. The best of three rounds (fresh session each) is returned,
    /// or `.nan` if anything fails.
    public static func unprotectCost(
        profile: SRTPProfile, payloadSize: Int, count: Int, implementation: Implementation = .libsrtp
    ) -> Double {
        guard let shape = Workload(profile: profile, payloadSize: payloadSize, count: count) else { return .nan }
        let (key, salt, rtpLength, slot) = (shape.key, shape.salt, shape.rtpLength, shape.slot)
        guard
            let outbound = try? SRTPSession(profile: profile, key: key, salt: salt, direction: .outbound)
        else {
            return .nan
        }

        // Protect every packet once, each with its own sequence number.
        var protected = [UInt8](repeating: 0, count: slot * count)
        var protectedLengths = [Int32](repeating: 0, count: count)
        let protectOK = protected.withUnsafeMutableBytes { all -> Bool in
            guard let base = all.baseAddress else { return false }
            for index in 0..<count {
                let packet = base + index * slot
                writePacket(packet, index: index, rtpLength: rtpLength)
                guard let length = try? outbound.protectRTP(packet, length: rtpLength, capacity: slot)
                else {
                    return false
                }
                protectedLengths[index] = Int32(length)
            }
            return true
        }
        guard protectOK else { return .nan }

        return bestOfThreeRounds(
            packets: protected, count: count, slot: slot, workload: shape, direction: .inbound
        ) { reference, ours, packet, index in
            var length = protectedLengths[index]
            switch implementation {
            case .libsrtp:
                return reference.rawUnprotect(packet, length: &length)
            case .understudy:
                return (try? ours.unprotectRTP(packet, length: Int(length))) != nil
            }
        }
    }

    /// Times `perPacket` over the `count` packets of `packets` (one `slot` each) in three rounds, each
    /// with fresh sessions of both implementations and a fresh copy of the packets (copied outside the
    /// timed region), and returns the best round's nanoseconds per packet, or `.nan` if a session
    /// cannot be made or a packet fails. Thread CPU time, not wall time: the figure must not depend on
    /// what else the machine runs.
    @inline(__always)
    private static func bestOfThreeRounds(
        packets: [UInt8], count: Int, slot: Int, workload: Workload, direction: SRTPSession.Direction,
        _ perPacket: (LibSRTPSession, SRTPSession, UnsafeMutableRawPointer, Int) -> Bool
    ) -> Double {
        var best = Double.infinity
        var work = packets
        for _ in 0..<3 {
            guard
                let reference = LibSRTPSession(
                    profile: workload.profile, key: workload.key, salt: workload.salt, direction: direction),
                let ours = try? SRTPSession(
                    profile: workload.profile, key: workload.key, salt: workload.salt, direction: direction)
            else { return .nan }
            work.withUnsafeMutableBytes { destination in
                packets.withUnsafeBytes { source in destination.copyMemory(from: source) }
            }
            var failures = 0
            let nanoseconds = work.withUnsafeMutableBytes { all -> Double in
                let base = all.baseAddress!  // non-empty: count > 0
                let start = threadCPUNanoseconds()
                for index in 0..<count where !perPacket(reference, ours, base + index * slot, index) {
                    failures += 1
                }
                return Double(threadCPUNanoseconds() - start)
            }
            guard failures == 0 else { return .nan }
            best = min(best, nanoseconds / Double(count))
        }
        return best
    }
}

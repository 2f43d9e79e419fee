import Foundation
import Media
import RTC
import RTCWire

/// CPU per received SRTP packet on the full receive path, against bare libsrtp unprotect.
///
/// Method: two real ``PeerConnection``s on two event loops connect over loopback (ICE, DTLS,
/// SRTP as negotiated). The sender blasts VP8-shaped frames of `packetsPerFrame` packets. The
/// receiving loop thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`) is sampled before and after, minus
/// the same thread's idle cost over an equal time, and divided by the packets it received. That
/// covers recvmmsg → demux → SRTP unprotect → RTP parse → receiver bookkeeping and VP8 frame
/// assembly. The anchor, in the same run, is bare `srtp_unprotect` of packets of the same size and
/// profile, timed in a tight loop.
public enum ReceivePathBenchmark {
    public struct Result: Sendable {
        public var packets: Int
        public var payloadBytes: Int
        public var profile: String
        public var fullPathNanosPerPacket: Double
        public var bareUnprotectNanosPerPacket: Double
        public var ratio: Double { fullPathNanosPerPacket / bareUnprotectNanosPerPacket }
        public var lostPackets: Int
        /// Share of the receive thread's busy time spent in the kernel (recvmmsg, UDP stack).
        public var kernelShare: Double
        /// The same connection's user-space work alone: packets handed to
        /// `MediaTransport.handleDatagram` directly on its loop thread (copied into a receive slot
        /// first, as `recvmmsg` would), no socket, no kernel, no wake-ups.
        public var userPathNanosPerPacket: Double
        /// Packets fed directly.
        public var directPackets: Int
    }

    /// Makes VP8-shaped frames: a keyframe every 300 frames, deltas otherwise.
    static func frames(count: Int, frameBytes: Int) -> [EncodedFrame] {
        let key = SyntheticVP8Frame.make(size: frameBytes, keyframe: true)
        let delta = SyntheticVP8Frame.make(size: frameBytes, keyframe: false)
        return (0..<count).map { n in
            var frame = n % 300 == 0 ? key : delta
            frame.timestamp = UInt32(truncatingIfNeeded: n &* 3000)
            return frame
        }
    }

    /// Replays captured SRTP packets from the sender's socket in bursts, on the sender's loop.
    // Safe: confined to the sender's loop thread (it is a ticker there); Sendable only to be handed to it.
    final class Replayer: EventLoopTicker, @unchecked Sendable {
        let packets: [[UInt8]]
        let socket: UDPSocket
        let remote: SocketAddress
        let perTick: Int
        var next = 0
        init(packets: [[UInt8]], socket: UDPSocket, remote: SocketAddress, perTick: Int) {
            self.packets = packets
            self.socket = socket
            self.remote = remote
            self.perTick = perTick
        }
        var done: Bool { next >= packets.count }
        func tick(now: UInt64) {
            let end = min(packets.count, next + perTick)
            while next < end {
                packets[next].withUnsafeBytes { socket.send($0, to: remote) }
                next += 1
            }
        }
    }

    /// Runs the benchmark. `packets` is approximate (rounded to whole frames).
    public static func run(packets: Int = 50_000, packetsPerFrame: Int = 8) async throws -> Result {
        let rxLoop = EventLoop(name: "bench-rx")
        let txLoop = EventLoop(name: "bench-tx")
        defer {
            rxLoop.shutdown()
            txLoop.shutdown()
        }
        let rx = try PeerConnection(loop: rxLoop)
        let tx = try PeerConnection(loop: txLoop)
        let transceiver = await txLoop.submit { tx.addTransceiver(kind: .video, direction: .sendonly) }
        let offer = try await txLoop.submit {
            let o = try tx.createOffer()
            try tx.setLocalDescription(o)
            return o
        }
        let answer = try await rxLoop.submit {
            try rx.setRemoteDescription(offer, type: .offer)
            let a = try rx.createAnswer()
            try rx.setLocalDescription(a)
            return a
        }
        try await txLoop.submit { try tx.setRemoteDescription(answer, type: .answer) }
        try await tx.waitUntilConnected(timeout: 10)
        try await rx.waitUntilConnected(timeout: 10)
        let profile = await rxLoop.submit { rx.srtpProfile.map { "\($0)" } ?? "none" }

        let payloadPerPacket = 1100
        let frameBytes = payloadPerPacket * packetsPerFrame - 100
        let totalFrames = max(10, packets / packetsPerFrame)

        // Capture the real SRTP packets the sender produces, then replay them: the measured window
        // then holds only the receiver's work, with no encryption running on another thread (which
        // would share libsrtp's crypto backend locks with the receiver).
        // Safe: filled on the sender's loop thread, read only after `loop.submit` returns (the hop orders it).
        final class Capture: @unchecked Sendable {
            var packets: [[UInt8]] = []
            var socket: UDPSocket?
            var remote: SocketAddress?
        }
        let capture = Capture()
        // A quarter more frames than the socket run, fed to the receiver directly afterwards (their
        // sequence numbers follow the socket run's, so SRTP and the receiver accept them as new).
        let directFrames = max(4, totalFrames / 4)
        let socketRunPackets = await txLoop.submit { () -> Int in
            tx.outboundRTPTap = { packet, socket, remote in
                capture.packets.append([UInt8](packet))
                capture.socket = socket
                capture.remote = remote
                return true
            }
            let all = frames(count: totalFrames + directFrames, frameBytes: frameBytes)
            for frame in all[..<totalFrames] { tx.send(frame, on: transceiver) }
            let boundary = capture.packets.count
            for frame in all[totalFrames...] { tx.send(frame, on: transceiver) }
            // From here on the sender stays silent (retransmissions included).
            tx.outboundRTPTap = { _, _, _ in true }
            return boundary
        }
        guard let socket = capture.socket, let remote = capture.remote, let senderAddress = tx.localAddress else {
            throw PeerConnectionError.invalidState("the sender produced no packets")
        }
        // ~40k packets/s (400 per 10 ms tick): a busy loop, as in load mode, still inside the socket
        // buffer so nothing is lost (the result reports losses).
        let blaster = Replayer(
            packets: Array(capture.packets[..<socketRunPackets]), socket: socket, remote: remote, perTick: 400)

        // Idle cost of the receive thread (ticks, timers) over one second.
        let idleStart = await rxLoop.submit { threadCPUNanoseconds() }
        let idleWallStart = EventLoop.now()
        try await Task.sleep(nanoseconds: 1_000_000_000)
        let idleEnd = await rxLoop.submit { threadCPUNanoseconds() }
        let idlePerNano = Double(idleEnd - idleStart) / Double(EventLoop.now() - idleWallStart)

        let before = await rxLoop.submit { (threadCPUNanoseconds(), rx.counters.packetsReceived) }
        let usageBefore = await rxLoop.submit { threadUserSystemNanoseconds() }
        let wallStart = EventLoop.now()
        await txLoop.submit { txLoop.addTicker(blaster) }
        while !(await txLoop.submit { blaster.done }) { try await Task.sleep(nanoseconds: 50_000_000) }
        // Wait for the tail to drain.
        var last = await rxLoop.submit { rx.counters.packetsReceived }
        while true {
            try await Task.sleep(nanoseconds: 200_000_000)
            let now = await rxLoop.submit { rx.counters.packetsReceived }
            if now == last { break }
            last = now
        }
        await txLoop.submit { txLoop.removeTicker(blaster) }
        let after = await rxLoop.submit { (threadCPUNanoseconds(), rx.counters.packetsReceived) }
        let usageAfter = await rxLoop.submit { threadUserSystemNanoseconds() }
        let userTime = Double(usageAfter.user - usageBefore.user)
        let systemTime = Double(usageAfter.system - usageBefore.system)
        let wall = Double(EventLoop.now() - wallStart)
        let received = Int(after.1 - before.1)
        let stats = await rxLoop.submit { rx.receiverStats() }
        let lost = stats.reduce(0) { $0 + Int(max(0, $1.stats.packetsLost)) }
        let busy = Double(after.0 - before.0) - idlePerNano * wall
        let perPacket = busy / Double(max(1, received))

        let direct = Array(capture.packets[socketRunPackets...])
        let userPath = try await feedDirectly(direct, to: rx, on: rxLoop, from: senderAddress, socket: socket)

        let srtpProfile: SRTPProfile = profile.contains("GCM") ? .aeadAES128GCM : .aes128CMHMACSHA1_80
        // The anchor is the median of several rounds, so one disturbed round does not decide it.
        var rounds: [Double] = []
        for _ in 0..<5 {
            rounds.append(
                SRTPBench.unprotectCost(profile: srtpProfile, payloadSize: payloadPerPacket + 20, count: 8_192))
        }
        let bare = rounds.sorted()[rounds.count / 2]
        await rxLoop.submit { rx.close() }
        await txLoop.submit { tx.close() }
        return Result(
            packets: received, payloadBytes: payloadPerPacket, profile: profile, fullPathNanosPerPacket: perPacket,
            bareUnprotectNanosPerPacket: bare, lostPackets: lost,
            kernelShare: systemTime / max(1, userTime + systemTime), userPathNanosPerPacket: userPath,
            directPackets: direct.count)
    }

    /// CPU per packet of `rx.handleDatagram` on its loop thread for `packets` (fresh SRTP packets of
    /// its stream), each copied into one receive slot first. Throws when the connection did not
    /// accept them all as media (the figure would then time a drop path).
    static func feedDirectly(
        _ packets: [[UInt8]], to rx: PeerConnection, on loop: EventLoop, from sender: SocketAddress,
        socket: UDPSocket
    ) async throws -> Double {
        // One contiguous copy of the packets, so the timed loop walks plain memory.
        var starts: [Int] = [0]
        for packet in packets { starts.append(starts[starts.count - 1] + packet.count) }
        let offsets = starts
        let flat = packets.flatMap { $0 }
        let (nanoseconds, accepted) = await loop.submit { () -> (UInt64, UInt64) in
            let slot = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 16)
            defer { slot.deallocate() }
            let before = rx.receiverStats().reduce(UInt64(0)) { $0 + $1.stats.packetsReceived }
            let start = threadCPUNanoseconds()
            flat.withUnsafeBytes { all in
                for i in 0..<(offsets.count - 1) {
                    let length = offsets[i + 1] - offsets[i]
                    slot.baseAddress!.copyMemory(from: all.baseAddress! + offsets[i], byteCount: length)
                    rx.transport.handleDatagram(
                        UnsafeMutableRawBufferPointer(rebasing: slot[..<length]), from: sender, socket: socket)
                }
            }
            let elapsed = threadCPUNanoseconds() - start
            let after = rx.receiverStats().reduce(UInt64(0)) { $0 + $1.stats.packetsReceived }
            return (elapsed, after - before)
        }
        guard accepted == UInt64(packets.count) else {
            throw PeerConnectionError.invalidState(
                "direct feed: \(accepted) of \(packets.count) packets accepted as media")
        }
        return Double(nanoseconds) / Double(max(1, packets.count))
    }
}

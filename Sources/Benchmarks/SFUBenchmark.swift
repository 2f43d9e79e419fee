import Media
import RTC
import RTCWire
import RoomServer
import SFU

#if canImport(Glibc)
    import Glibc
#endif

/// Measures the SFU forwarding path: forwarded packets per second of SFU loop-thread CPU.
public enum SFUBenchmark {
    /// Publisher → SFU → `subscribers` subscribers over real loopback UDP with DTLS-SRTP (GCM).
    ///
    /// The publisher sends synthetic VP8 frames (key frame every 30, about 6 packets per frame) as
    /// fast as `packetsPerSecond` asks; every subscriber consumes the track. The SFU loop thread's CPU
    /// time (`CLOCK_THREAD_CPUTIME_ID`, read on that thread) is divided into the packets it forwarded,
    /// so the figure does not depend on how busy the other threads keep the cores.
    ///
    /// - Returns: forwarded packets per CPU-second of the SFU thread, and a description of the method.
    public static func run(seconds: Double) async throws -> (packetsPerSecondPerCore: Double, method: String) {
        try await run(seconds: seconds, subscribers: 4, packetsPerSecond: 6000)
    }

    /// ``run(seconds:)`` with the fan-out and the publisher's packet rate chosen.
    public static func run(seconds: Double, subscribers: Int, packetsPerSecond: Int) async throws -> (
        packetsPerSecondPerCore: Double, method: String
    ) {
        let m = try await measure(seconds: seconds, subscribers: subscribers, packetsPerSecond: packetsPerSecond)
        return (m.packetsPerSecondPerCore, m.method)
    }

    /// What one benchmark run counted.
    struct Measurement {
        var packetsIn: UInt64
        var packetsForwarded: UInt64
        var cpuSeconds: Double
        var packetsPerSecondPerCore: Double
        var method: String
    }

    static func measure(seconds: Double, subscribers: Int, packetsPerSecond: Int) async throws -> Measurement {
        let fanOut = max(1, subscribers)
        let sfu = SFU(configuration: SFUConfiguration(loopName: "sfu-bench"))
        let publisherLoop = EventLoop(name: "bench-pub")
        let subscriberLoop = EventLoop(name: "bench-sub")
        let publisher = try PeerConnection(loop: publisherLoop)
        var subscriberConnections: [PeerConnection] = []
        defer {
            publisherLoop.shutdown()
            subscriberLoop.shutdown()
        }

        let (video, producer) = try await publishVideo(publisher, to: sfu, as: "bench-publisher")

        for i in 0..<fanOut {
            let id = "bench-subscriber-\(i)"
            let pc = try PeerConnection(loop: subscriberLoop)
            subscriberConnections.append(pc)
            try await subscribe(pc, as: id, to: producer, on: sfu)
        }

        let source = BenchFrameSource(connection: publisher, transceiver: video, packetsPerSecond: packetsPerSecond)
        await publisherLoop.submit { publisherLoop.addTicker(source) }
        // Warm up until every consumer has its first key frame.
        try await Task.sleep(nanoseconds: 1_500_000_000)

        let start = await sfu.loop.submit { (threadCPU(), sfu.counters.packetsOut, sfu.counters.packetsIn) }
        try await Task.sleep(nanoseconds: UInt64(max(0.5, seconds) * 1e9))
        let end = await sfu.loop.submit { (threadCPU(), sfu.counters.packetsOut, sfu.counters.packetsIn) }
        await publisherLoop.submit { publisherLoop.removeTicker(source) }

        for pc in subscriberConnections { await subscriberLoop.submit { pc.close() } }
        await publisherLoop.submit { publisher.close() }
        await sfu.shutdown()

        let cpu = Double(end.0 &- start.0) / 1e9
        let forwarded = Double(end.1 &- start.1)
        let received = Double(end.2 &- start.2)
        guard cpu > 0, forwarded > 0 else { throw SFUError.negotiation("nothing was forwarded during the benchmark") }
        let cpuMillis = Int(cpu * 1000)
        var method = "publisher -> SFU -> \(fanOut) subscribers, loopback UDP, DTLS-SRTP GCM, VP8 ~1.1 kB packets; "
        method += "\(Int(received)) packets in, \(Int(forwarded)) forwarded in \(Int(seconds * 1000)) ms; "
        method += "forwarded packets / SFU loop-thread CPU seconds (CLOCK_THREAD_CPUTIME_ID, \(cpuMillis) ms); "
        method +=
            "includes SRTP unprotect, receiver bookkeeping (NACK/RR, frame assembly), rewrite, SRTP protect, sendmmsg"
        return Measurement(
            packetsIn: end.2 &- start.2, packetsForwarded: end.1 &- start.1, cpuSeconds: cpu,
            packetsPerSecondPerCore: forwarded / cpu, method: method)
    }

    /// Memory the SFU holds per subscriber with one video consumer: the process's resident size
    /// before and after `subscribers` subscribers each consume one video producer and get
    /// their subscribe offer (server connection with its sockets, DTLS and ICE state, transceiver,
    /// sender, consumer and its sequencer), divided by `subscribers`. The subscribers do not connect,
    /// so SRTP contexts (a few KB) are not counted.
    public static func memoryPerVideoConsumer(subscribers: Int = 100) async throws -> (
        kilobytes: Double, method: String
    ) {
        let count = max(1, subscribers)
        let sfu = SFU(configuration: SFUConfiguration(loopName: "sfu-mem"))
        let publisherLoop = EventLoop(name: "mem-pub")
        defer { publisherLoop.shutdown() }
        let publisher = try PeerConnection(loop: publisherLoop)
        let offer = try await publisherLoop.submit {
            _ = publisher.addTransceiver(kind: .video, direction: .sendonly)
            let o = try publisher.createOffer()
            try publisher.setLocalDescription(o)
            return o
        }
        let published = try await sfu.publish(participantID: "mem-publisher", offer: offer)
        guard let producer = published.producers.first else { throw SFUError.negotiation("no producer") }
        // One subscriber first, so state made once (caches, the shared port) is not counted.
        _ = try await sfu.onLoop { try $0.consumeOnLoop(subscriber: "mem-warm", producerID: producer.id) }
        _ = try await sfu.onLoop { try $0.subscriberOfferOnLoop(participantID: "mem-warm") }
        // Free memory left by earlier benchmarks in this process would be reused without raising the
        // resident size; returning it to the kernel first makes the growth the consumers' own.
        releaseFreeHeapPages()
        let before = await sfu.loop.submit { residentBytes() }
        for i in 0..<count {
            _ = try await sfu.onLoop { try $0.consumeOnLoop(subscriber: "mem-\(i)", producerID: producer.id) }
            _ = try await sfu.onLoop { try $0.subscriberOfferOnLoop(participantID: "mem-\(i)") }
        }
        let after = await sfu.loop.submit { residentBytes() }
        await publisherLoop.submit { publisher.close() }
        await sfu.shutdown()
        let kilobytes = Double(Int64(after) - Int64(before)) / Double(count) / 1024
        let method =
            "resident set size (/proc/self/statm, after malloc_trim) before and after \(count) subscribers each consume "
            + "one video producer and get their subscribe offer, divided by \(count); server side only, before DTLS/SRTP"
        return (kilobytes, method)
    }

    /// glibc's `malloc_trim(0)`: gives free heap pages back to the kernel (``MemoryTrim``).
    static func releaseFreeHeapPages() { MemoryTrim.trimNow() }

    /// Resident set size of this process in bytes (`/proc/self/statm`), 0 when unreadable.
    static func residentBytes() -> UInt64 {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = UInt64(fields[1]) else { return 0 }
        return pages * UInt64(sysconf(Int32(_SC_PAGESIZE)))
    }

    static func threadCPU() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}

/// Sends fabricated VP8 frames at a fixed packet rate on the publisher's loop thread.
// Safe: confined to the publisher's loop thread (a ticker there); Sendable only to be handed to it.
final class BenchFrameSource: EventLoopTicker, @unchecked Sendable {
    let connection: PeerConnection
    let transceiver: RTPTransceiver
    let framesPerSecond: Double
    var keyframe: EncodedFrame
    var delta: EncodedFrame
    var start: UInt64?
    var sent = 0

    init(connection: PeerConnection, transceiver: RTPTransceiver, packetsPerSecond: Int) {
        self.connection = connection
        self.transceiver = transceiver
        // 6 packets per 6.6 kB frame at the sender's 1150-byte payload size.
        framesPerSecond = Double(max(60, packetsPerSecond)) / 6
        keyframe = SyntheticVP8Frame.make(size: 6600, keyframe: true)
        delta = SyntheticVP8Frame.make(size: 6600, keyframe: false)
    }

    func tick(now: UInt64) {
        if start == nil { start = now }
        let due = Int(Double(now - (start ?? now)) / 1e9 * framesPerSecond)
        while sent <= due {
            let timestamp = UInt32(truncatingIfNeeded: sent &* 3000)
            if sent % 30 == 0 {
                keyframe.timestamp = timestamp
                connection.send(keyframe, on: transceiver)
            } else {
                delta.timestamp = timestamp
                connection.send(delta, on: transceiver)
            }
            sent += 1
        }
    }
}

extension SFUBenchmark {
    /// Publishes one send-only video track of `publisher` on `sfu` as `participantID` and waits until
    /// the connection is up: the track's transceiver and the producer the SFU made of it.
    static func publishVideo(_ publisher: PeerConnection, to sfu: SFU, as participantID: String) async throws
        -> (RTPTransceiver, ProducerInfo)
    {
        let (offer, video) = try await publisher.loop.submit {
            let t = publisher.addTransceiver(kind: .video, direction: .sendonly)
            let o = try publisher.createOffer()
            try publisher.setLocalDescription(o)
            return (o, t)
        }
        let published = try await sfu.publish(participantID: participantID, offer: offer)
        try await publisher.loop.submit { try publisher.setRemoteDescription(published.answer, type: .answer) }
        try await publisher.waitUntilConnected(timeout: 10)
        guard let producer = published.producers.first else { throw SFUError.negotiation("no producer") }
        return (video, producer)
    }

    /// Makes `subscriber` consume `producer` on `sfu` as `participantID` and waits until its
    /// subscribe connection is up.
    static func subscribe(
        _ subscriber: PeerConnection, as participantID: String, to producer: ProducerInfo, on sfu: SFU
    ) async throws {
        _ = try await sfu.onLoop { try $0.consumeOnLoop(subscriber: participantID, producerID: producer.id) }
        let offer = try await sfu.onLoop { try $0.subscriberOfferOnLoop(participantID: participantID) }
        let answer = try await subscriber.loop.submit {
            try subscriber.setRemoteDescription(offer, type: .offer)
            let a = try subscriber.createAnswer()
            try subscriber.setLocalDescription(a)
            return a
        }
        try await sfu.onLoop { try $0.subscriberAnswerOnLoop(participantID: participantID, answer: answer) }
        try await subscriber.waitUntilConnected(timeout: 10)
    }
}

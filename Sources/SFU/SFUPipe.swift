import RTC
import RTCWire

/// A node-to-node media link between two SFUs, as mediasoup's `PipeTransport`: plain RTP/RTCP over
/// one UDP socket per side, carrying producers of one SFU (the origin) to the other (an edge).
///
/// The origin side taps each piped producer: every packet of every layer (simulcast included) goes
/// out once, its SSRC replaced by the pipe's SSRC of that layer and its payload type by
/// ``payloadType``, so the edge tells streams apart by SSRC alone. The edge side reads each stream
/// with an ``RTPReceiver`` (loss detection, NACKs, PLIs, receiver reports) and feeds a mirrored
/// ``SFUProducer`` whose consumers are like any other's. Feedback goes upstream: the mirrored
/// producer throttles its consumers' key-frame requests (one PLI per layer per
/// ``SFUConfiguration/keyframeRequestInterval``, however many viewers ask), the origin answers a
/// NACK from its own copy of what it sent, and forwards the publisher's sender reports once a
/// second so an edge lines up simulcast layers at a switch as the origin does.
///
/// Plain RTP, not SRTP: a pipe runs between the nodes of one cluster on a private network, as
/// mediasoup's pipes do by default. It accepts datagrams only from the remote address it was
/// connected to; everything else is counted and dropped (``SFUPipeStats``).
///
/// Loop-thread confined; per packet: no allocation, no lock, no hop.
// Safe: confined to the SFU's loop thread (created, used and closed there).
final class SFUPipe: @unchecked Sendable, DatagramHandler, EventLoopTicker {
    /// The payload type of every media packet on a pipe (streams are told apart by SSRC).
    static let payloadType: UInt8 = 100
    /// Largest datagram a pipe sends or accepts.
    static let maxDatagram = 1500
    /// How often the origin side forwards each layer's latest sender report.
    static let senderReportInterval: UInt64 = 1_000_000_000

    let id: String
    unowned(unsafe) let sfu: SFU
    let socket: UDPSocket
    /// Where this pipe sends and the only address it accepts datagrams from (nil: not connected).
    var remote: SocketAddress?
    /// SSRC of this side's RTCP.
    let localSSRC: UInt32 = UInt32.random(in: 1...UInt32.max)
    /// Origin side: the taps by SSRC (each layer of each piped producer), and by producer id.
    var outboundBySSRC: [UInt32: (tap: SFUPipeOutbound, layer: Int)] = [:]
    var outbound: [String: SFUPipeOutbound] = [:]
    /// Edge side: the mirrored producers' streams by SSRC, and in a list for the ticker.
    var inboundBySSRC: [UInt32: SFUPipeInbound] = [:]
    var inbound: [SFUPipeInbound] = []
    /// The mirrored producers of this pipe (edge side), by id.
    var mirrored: [String: SFUProducer] = [:]
    var counters = SFUPipeStats.Counters()
    private let sendBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: SFUPipe.maxDatagram, alignment: 16)
    private let rtcpBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256, alignment: 16)
    private var lastSenderReports: UInt64 = 0
    private(set) var closed = false

    init(id: String, sfu: SFU, bindTo address: SocketAddress) throws {
        self.id = id
        self.sfu = sfu
        // The socket needs its handler at creation: a placeholder until `self` exists.
        let relay = SFUPipeHandlerRelay()
        socket = try sfu.loop.openUDP(bindTo: address, handler: relay)
        relay.pipe = self
    }

    deinit {
        sendBuffer.deallocate()
        rtcpBuffer.deallocate()
    }

    var localAddress: SocketAddress { socket.localAddress }

    // MARK: Origin side (sending)

    /// Sends one packet of `tap`'s producer, `layer`: the header as received (RTX unwrapped: the
    /// media sequence number and payload), SSRC and payload type replaced, padding dropped.
    @inline(__always)
    func forward(_ tap: SFUPipeOutbound, layer: Int, _ packet: ReceivedRTPPacket) {
        guard let remote, let base = sendBuffer.baseAddress, let source = packet.packet.baseAddress,
            let payload = packet.payload.baseAddress
        else { return }
        let headerLength = packet.header.payloadOffset
        let length = headerLength + packet.payload.count
        guard headerLength >= 12, length <= Self.maxDatagram else {
            counters.droppedOversize &+= 1
            return
        }
        base.copyMemory(from: source, byteCount: headerLength)
        (base + headerLength).copyMemory(from: payload, byteCount: packet.payload.count)
        sendBuffer[0] &= ~0x20  // no padding: only the payload was copied
        sendBuffer[1] = (sendBuffer[1] & 0x80) | Self.payloadType
        sendBuffer[2] = UInt8(truncatingIfNeeded: packet.sequenceNumber >> 8)
        sendBuffer[3] = UInt8(truncatingIfNeeded: packet.sequenceNumber)
        let ssrc = tap.ssrcs[layer]
        sendBuffer.put32(ssrc, at: 8)
        let bytes = UnsafeRawBufferPointer(start: base, count: length)
        if !tap.buffers.isEmpty { tap.buffers[layer].store(sequenceNumber: packet.sequenceNumber, payload: bytes) }
        tap.packetsSent[layer] &+= 1
        tap.octetsSent[layer] &+= UInt32(truncatingIfNeeded: packet.payload.count)
        counters.packetsSent &+= 1
        counters.bytesSent &+= UInt64(length)
        sfu.counters.packetsOut &+= 1
        sfu.counters.bytesOut &+= UInt64(length)
        socket.send(bytes, to: remote)
    }

    /// Starts sending `producer` over this pipe; returns what the far side needs to mirror it.
    func add(_ producer: SFUProducer) -> SFUPipedProducer {
        if let existing = outbound[producer.id] { return existing.description }
        var ssrcs: [UInt32] = []
        for _ in producer.layers {
            var ssrc = UInt32.random(in: 1...UInt32.max)
            while outboundBySSRC[ssrc] != nil || ssrcs.contains(ssrc) { ssrc = UInt32.random(in: 1...UInt32.max) }
            ssrcs.append(ssrc)
        }
        let description = SFUPipedProducer(
            producerID: producer.id, participantID: producer.participantID, kind: producer.kind,
            source: producer.source, codec: producer.codec, codecParameters: producer.codecParameters,
            rids: producer.layers.compactMap(\.rid), ssrcs: ssrcs, mid: producer.mid,
            audioLevelExtensionID: producer.audioLevelExtensionID,
            captureTimeExtensionID: producer.captureTimeExtensionID)
        let tap = SFUPipeOutbound(pipe: self, producer: producer, description: description)
        outbound[producer.id] = tap
        for (layer, ssrc) in ssrcs.enumerated() { outboundBySSRC[ssrc] = (tap, layer) }
        producer.pipeTaps.append(tap)
        // The edge's viewers start on a key frame sooner when one is asked for now.
        if producer.kind == .video {
            for layer in producer.layers.indices { producer.requestKeyframe(layer: layer, now: EventLoop.now()) }
        }
        return description
    }

    /// Stops sending `producerID` over this pipe (its producer closed, or the far side needs it no more).
    func remove(producerID: String) {
        guard let tap = outbound.removeValue(forKey: producerID) else { return }
        for ssrc in tap.ssrcs { outboundBySSRC[ssrc] = nil }
        tap.producer.pipeTaps.removeAll { $0 === tap }
    }

    /// Answers the edge's feedback about what this side sends: NACKs from the tap's copies, PLIs
    /// through the producer's own throttle (so all edges together draw one PLI per interval).
    private func handleFeedback(_ view: RTCPPacketView, now: UInt64) throws(RTCPError) {
        if view.isNACK {
            counters.nacksReceived &+= 1
            guard let (tap, layer) = outboundBySSRC[view.mediaSSRC], !tap.buffers.isEmpty, let remote else { return }
            try view.forEachNACKSequence { sequence in
                if let stored = tap.buffers[layer].payload(sequenceNumber: sequence) {
                    counters.retransmissions &+= 1
                    socket.send(stored, to: remote)
                }
            }
        } else if view.isPLI || view.isFIR {
            counters.plisReceived &+= 1
            guard let (tap, layer) = outboundBySSRC[view.mediaSSRC] else { return }
            tap.producer.requestKeyframe(layer: layer, now: now)
        }
    }

    /// Forwards each tapped layer's latest sender report under the pipe's SSRC (once a second): the
    /// publisher's own NTP/RTP relation, moved forward from when that report came to now (both
    /// clocks by the time since), so that each relay is fresh. A report resent as it came would be
    /// up to a second old (five for Chromium's audio) when it reaches the edge, which maps a report's
    /// instant by its arrival (``SenderClockMapping``): audio and video would land apart by their
    /// reports' different ages.
    private func sendSenderReports(now: UInt64) {
        guard let remote, !outbound.isEmpty, now &- lastSenderReports >= Self.senderReportInterval else { return }
        lastSenderReports = now
        for tap in outbound.values {
            let clockRate = Int64(tap.producer.codec.clockRate)
            for layer in tap.ssrcs.indices {
                guard let report = tap.producer.senderReport(layer: layer) else { continue }
                let since = Int64(bitPattern: now &- report.localTime)
                let rtp = report.rtpTimestamp &+ UInt32(truncatingIfNeeded: since * clockRate / 1_000_000_000)
                guard
                    let end = try? RTCPWriter.writeSenderReport(
                        into: rtcpBuffer, at: 0, ssrc: tap.ssrcs[layer],
                        ntpTimestamp: report.ntp.adding(nanoseconds: since).value, rtpTimestamp: rtp,
                        packetCount: tap.packetsSent[layer], octetCount: tap.octetsSent[layer])
                else { continue }
                socket.send(UnsafeRawBufferPointer(rebasing: rtcpBuffer[0..<end]), to: remote)
            }
        }
    }

    // MARK: Edge side (receiving)

    /// Creates the mirrored producer of `description` fed by this pipe.
    func mirror(_ description: SFUPipedProducer) throws -> SFUProducer {
        guard description.ssrcs.count == max(1, description.kind == .video ? description.rids.count : 0),
            description.ssrcs.allSatisfy({ $0 != 0 && inboundBySSRC[$0] == nil }),
            Set(description.ssrcs).count == description.ssrcs.count
        else { throw SFUError.badPipedProducer(description.producerID) }
        let upstream = SFUPipeUpstream(pipe: self)
        let producer = SFUProducer(
            id: description.producerID, participantID: description.participantID, kind: description.kind,
            source: description.source, mid: description.mid, rids: description.rids, upstream: upstream,
            audioLevelExtensionID: description.audioLevelExtensionID,
            captureTimeExtensionID: description.captureTimeExtensionID, sfu: sfu, codec: description.codec,
            codecParameters: description.codecParameters)
        var options = RTPReceiverOptions(nack: description.kind == .video, pli: true)
        // The mirrored producer throttles consumers' requests; the receiver's own throttle only
        // spaces the requests of its frame assembler (a broken frame) the same way.
        options.keyframeRequestInterval = sfu.configuration.keyframeRequestInterval
        for (layer, ssrc) in description.ssrcs.enumerated() {
            let receiver = RTPReceiver(
                ssrc: ssrc, codec: description.codec, payloadType: Self.payloadType, localSSRC: localSSRC,
                options: options)
            receiver.measuresQuality = false
            let rid = layer < description.rids.count ? description.rids[layer] : nil
            let stream = SFUPipeInbound(ssrc: ssrc, rid: rid, receiver: receiver, producer: producer)
            inboundBySSRC[ssrc] = stream
            inbound.append(stream)
            upstream.streams.append(stream)
        }
        mirrored[producer.id] = producer
        return producer
    }

    /// The mirrored producer closed: its streams are read no more.
    func unmirror(_ upstream: SFUPipeUpstream) {
        for stream in upstream.streams {
            inboundBySSRC[stream.ssrc] = nil
            if let producer = stream.producer { mirrored[producer.id] = nil }
            stream.producer = nil
        }
        inbound.removeAll { stream in upstream.streams.contains { $0 === stream } }
        upstream.streams = []
    }

    func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket) {
        handleDatagram(data, from: from, socket: socket, now: EventLoop.now())
    }

    func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket, now: UInt64) {
        guard !closed else { return }
        guard let remote, remote == from else {
            counters.droppedUnknownAddress &+= 1
            return
        }
        counters.packetsReceived &+= 1
        counters.bytesReceived &+= UInt64(data.count)
        let bytes = UnsafeRawBufferPointer(data)
        guard bytes.count >= 12, RTPHeader.isRTPOrRTCP(bytes[0]) else {
            counters.droppedMalformed &+= 1
            return
        }
        if RTPHeader.isRTCP(bytes) {
            do throws(RTCPError) {
                try RTCPCompound.forEach(bytes) { view throws(RTCPError) in
                    if view.isSenderReport {
                        let info = try view.senderInfo()
                        inboundBySSRC[info.ssrc]?.receiver.handleSenderReport(
                            ntp: info.ntpTimestamp, rtpTimestamp: info.rtpTimestamp, now: now)
                    } else {
                        try handleFeedback(view, now: now)
                    }
                }
            } catch {
                counters.droppedMalformed &+= 1
            }
            return
        }
        let header: RTPHeader
        do { header = try RTPHeader.parse(bytes) } catch {
            counters.droppedMalformed &+= 1
            return
        }
        guard let stream = inboundBySSRC[header.ssrc], let producer = stream.producer else {
            counters.droppedUnknownSSRC &+= 1
            return
        }
        guard let read = stream.receiver.receive(bytes, header: header, now: now) else {
            counters.droppedMalformed &+= 1
            return
        }
        guard !read.payload.isEmpty else { return }
        producer.receive(
            rid: stream.rid,
            ReceivedRTPPacket(
                packet: bytes, header: header, mediaSSRC: header.ssrc, sequenceNumber: read.sequenceNumber,
                payload: read.payload, info: read.info, isRepair: read.isRepair, arrival: now))
    }

    // MARK: Timers

    func tick(now: UInt64) {
        guard !closed, let remote else { return }
        for stream in inbound {
            stream.receiver.tick(now: now) { buffer, length in
                socket.send(UnsafeRawBufferPointer(rebasing: buffer[0..<length]), to: remote)
            }
        }
        sendSenderReports(now: now)
    }

    /// Stops both directions and closes the socket (the SFU removes the mirrored producers first).
    func close() {
        guard !closed else { return }
        for id in Array(outbound.keys) { remove(producerID: id) }
        closed = true
        socket.close()
    }

    func stats() -> SFUPipeStats {
        var c = counters
        for stream in inbound {
            let s = stream.receiver.stats
            c.nacksSent &+= s.nacksSent
            c.plisSent &+= s.plisSent
            c.packetsLost &+= s.packetsLost
            c.repairsReceived &+= s.retransmissionsReceived
        }
        return SFUPipeStats(
            id: id, localAddress: localAddress.description, remoteAddress: remote?.description,
            sending: outbound.keys.sorted(), receiving: mirrored.keys.sorted(), counters: c)
    }
}

/// The socket's handler until its pipe exists (the pipe owns the socket, the socket its handler).
final class SFUPipeHandlerRelay: DatagramHandler {
    weak var pipe: SFUPipe?

    func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket) {
        pipe?.handleDatagram(data, from: from, socket: socket)
    }

    func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket, now: UInt64) {
        pipe?.handleDatagram(data, from: from, socket: socket, now: now)
    }
}

/// The origin side of one piped producer: its SSRCs on the pipe and a copy of what was sent per
/// layer (video) to answer the edge's NACKs.
final class SFUPipeOutbound {
    unowned(unsafe) let pipe: SFUPipe
    let producer: SFUProducer
    let description: SFUPipedProducer
    let ssrcs: [UInt32]
    /// Whole packets as sent on the pipe (empty for audio, which is not repaired).
    let buffers: [SFUPacketBuffer]
    var packetsSent: [UInt32]
    var octetsSent: [UInt32]

    init(pipe: SFUPipe, producer: SFUProducer, description: SFUPipedProducer) {
        self.pipe = pipe
        self.producer = producer
        self.description = description
        ssrcs = description.ssrcs
        buffers = producer.kind == .video ? description.ssrcs.map { _ in SFUPacketBuffer() } : []
        packetsSent = Array(repeating: 0, count: description.ssrcs.count)
        octetsSent = Array(repeating: 0, count: description.ssrcs.count)
    }

    @inline(__always)
    func forward(layer: Int, _ packet: ReceivedRTPPacket) { pipe.forward(self, layer: layer, packet) }
}

/// One layer of a mirrored producer on the edge side.
final class SFUPipeInbound {
    let ssrc: UInt32
    let rid: String?
    let receiver: RTPReceiver
    /// Cleared when the mirrored producer closes (it holds this stream through its upstream).
    var producer: SFUProducer?

    init(ssrc: UInt32, rid: String?, receiver: RTPReceiver, producer: SFUProducer) {
        self.ssrc = ssrc
        self.rid = rid
        self.receiver = receiver
        self.producer = producer
    }
}

/// A mirrored producer's upstream: its layers' receivers on the pipe.
final class SFUPipeUpstream: SFUUpstream {
    unowned(unsafe) let pipe: SFUPipe
    var streams: [SFUPipeInbound] = []

    init(pipe: SFUPipe) { self.pipe = pipe }

    func requestKeyframe(rid: String?) {
        (streams.first { $0.rid == rid } ?? streams.first)?.receiver.requestKeyframeNow()
    }

    func senderReport(ssrc: UInt32) -> SFULayerTimeline.SenderReport? {
        streams.first { $0.ssrc == ssrc }?.receiver.senderReport
    }

    var nacksSent: UInt64 { streams.reduce(0) { $0 &+ $1.receiver.stats.nacksSent } }

    func stopReceiving() { pipe.unmirror(self) }
}

/// What an edge needs to mirror a producer piped from another SFU: sent from the origin's
/// ``SFU/pipeProducerOnLoop(pipeID:producerID:)`` to the edge's
/// ``SFU/addPipedProducerOnLoop(pipeID:_:)`` over the cluster's signalling.
public struct SFUPipedProducer: Sendable, Hashable {
    /// The origin's producer id, kept on the edge so both name the track alike.
    public var producerID: String
    public var participantID: String
    public var kind: MediaKind
    public var source: SFUMediaSource
    public var codec: MediaCodec
    public var codecParameters: [SDPParameter]?
    /// Simulcast RIDs (empty: one encoding).
    public var rids: [String]
    /// The pipe's SSRC of each layer, in ``rids`` order (one for a single-encoding track).
    public var ssrcs: [UInt32]
    public var mid: String
    /// The publisher's header-extension ids, which the piped packets keep (0: none).
    public var audioLevelExtensionID: UInt8
    public var captureTimeExtensionID: UInt8

    public init(
        producerID: String, participantID: String, kind: MediaKind, source: SFUMediaSource, codec: MediaCodec,
        codecParameters: [SDPParameter]?, rids: [String], ssrcs: [UInt32], mid: String,
        audioLevelExtensionID: UInt8, captureTimeExtensionID: UInt8
    ) {
        self.producerID = producerID
        self.participantID = participantID
        self.kind = kind
        self.source = source
        self.codec = codec
        self.codecParameters = codecParameters
        self.rids = rids
        self.ssrcs = ssrcs
        self.mid = mid
        self.audioLevelExtensionID = audioLevelExtensionID
        self.captureTimeExtensionID = captureTimeExtensionID
    }
}

/// Counters of one pipe.
public struct SFUPipeStats: Sendable, Hashable {
    public struct Counters: Sendable, Hashable {
        /// Media packets sent (origin side) and datagrams accepted (from the remote address).
        public var packetsSent: UInt64 = 0
        public var bytesSent: UInt64 = 0
        public var packetsReceived: UInt64 = 0
        public var bytesReceived: UInt64 = 0
        /// NACK messages received and packets resent for them (origin side).
        public var nacksReceived: UInt64 = 0
        public var retransmissions: UInt64 = 0
        /// PLI/FIR received (origin side): what all of the edge's viewers' requests came to.
        public var plisReceived: UInt64 = 0
        /// NACKs and PLIs sent, packets lost net of repairs (edge side, from the mirrored streams'
        /// receivers).
        public var nacksSent: UInt64 = 0
        public var plisSent: UInt64 = 0
        public var packetsLost: Int64 = 0
        /// Lost packets that arrived afterwards, resent by the origin (edge side).
        public var repairsReceived: UInt64 = 0
        /// Datagrams dropped: from another address than the connected remote, not RTP/RTCP or
        /// malformed, for an SSRC this pipe does not receive, and packets too large to pipe.
        public var droppedUnknownAddress: UInt64 = 0
        public var droppedMalformed: UInt64 = 0
        public var droppedUnknownSSRC: UInt64 = 0
        public var droppedOversize: UInt64 = 0
        public init() {}
    }

    public var id: String
    /// This side's socket, and the remote it is connected to (nil: not yet).
    public var localAddress: String
    public var remoteAddress: String?
    /// Producer ids sent over this pipe and mirrored from it.
    public var sending: [String]
    public var receiving: [String]
    public var counters: Counters
}

// MARK: - The SFU's pipe API

extension SFU {
    /// Opens a pipe: a UDP socket on the first media address (`port` 0: an ephemeral one) for a
    /// node-to-node media link to one other SFU. Returns its local address, which the other side
    /// passes to ``connectPipeOnLoop(id:remote:)``. Opening an open id returns its address again.
    /// On the loop thread.
    public func openPipeOnLoop(id: String, port: UInt16 = 0) throws -> SocketAddress {
        loop.assertInLoop()
        guard !closed else { throw SFUError.closed }
        if let existing = pipes[id] { return existing.localAddress }
        guard let address = SocketAddress(ip: configuration.mediaAddresses.first ?? "127.0.0.1", port: port) else {
            throw SFUError.negotiation("bad media address")
        }
        let pipe: SFUPipe
        do { pipe = try SFUPipe(id: id, sfu: self, bindTo: address) } catch {
            throw SFUError.negotiation("cannot open pipe \(id) on \(address): \(error)")
        }
        pipes[id] = pipe
        loop.addTicker(pipe)
        return pipe.localAddress
    }

    /// Sets where pipe `id` sends, and the only address it accepts datagrams from. On the loop thread.
    public func connectPipeOnLoop(id: String, remote: SocketAddress) throws {
        loop.assertInLoop()
        guard let pipe = pipes[id] else { throw SFUError.unknownPipe(id) }
        pipe.remote = remote
    }

    /// Sends producer `producerID` over pipe `pipeID` (every layer, from its next packet; a key
    /// frame is asked for). Returns what the other side passes to ``addPipedProducerOnLoop(pipeID:_:)``.
    /// Piping a producer twice returns the same description. What reaches the other side before it
    /// mirrors the producer is counted there as an unknown SSRC and dropped (its viewers start on a
    /// key frame anyway). On the loop thread.
    public func pipeProducerOnLoop(pipeID: String, producerID: String) throws -> SFUPipedProducer {
        loop.assertInLoop()
        guard let pipe = pipes[pipeID] else { throw SFUError.unknownPipe(pipeID) }
        guard let producer = producers[producerID], !producer.closed else {
            throw SFUError.unknownProducer(producerID)
        }
        return pipe.add(producer)
    }

    /// Stops sending `producerID` over pipe `pipeID` (the other side closes its mirror with
    /// ``closeProducer(_:)``). On the loop thread.
    public func unpipeProducerOnLoop(pipeID: String, producerID: String) throws {
        loop.assertInLoop()
        guard let pipe = pipes[pipeID] else { throw SFUError.unknownPipe(pipeID) }
        pipe.remove(producerID: producerID)
    }

    /// Mirrors a producer another SFU sends over pipe `pipeID`: a producer with the same id, fed by
    /// the pipe, that local subscribers consume like any other (``consumeOnLoop(subscriber:producerID:quality:)``).
    /// ``closeProducer(_:)`` removes it. On the loop thread.
    public func addPipedProducerOnLoop(pipeID: String, _ description: SFUPipedProducer) throws -> ProducerInfo {
        loop.assertInLoop()
        guard !closed else { throw SFUError.closed }
        guard let pipe = pipes[pipeID] else { throw SFUError.unknownPipe(pipeID) }
        guard producers[description.producerID] == nil else {
            throw SFUError.badPipedProducer(description.producerID)
        }
        let producer = try pipe.mirror(description)
        producers[producer.id] = producer
        return producer.info
    }

    /// An edge's mirror of `description` on pipe `pipeID`, made when missing. A mirror of the same
    /// producer with other SSRCs (the origin piped it anew after an unpipe) is replaced: its
    /// consumers close with it. Returns true when a mirror was made. On the loop thread.
    @discardableResult
    public func ensurePipedProducerOnLoop(pipeID: String, _ description: SFUPipedProducer) throws -> Bool {
        loop.assertInLoop()
        guard let pipe = pipes[pipeID] else { throw SFUError.unknownPipe(pipeID) }
        if let existing = producers[description.producerID] {
            let ssrcs = pipe.inboundBySSRC.filter { $0.value.producer === existing }.map(\.key)
            if pipe.mirrored[existing.id] === existing, Set(ssrcs) == Set(description.ssrcs) { return false }
            // Another pipe's or a local producer of that id is never replaced.
            guard pipe.mirrored[existing.id] === existing else {
                throw SFUError.badPipedProducer(description.producerID)
            }
            removeProducer(existing)
        }
        _ = try addPipedProducerOnLoop(pipeID: pipeID, description)
        return true
    }

    /// The participant whose publish connection feeds `producerID` (nil: unknown, or a mirror). On
    /// the loop thread.
    public func producerOwnerOnLoop(_ producerID: String) -> String? {
        loop.assertInLoop()
        guard let producer = producers[producerID], !(producer.upstream is SFUPipeUpstream) else { return nil }
        return producer.participantID
    }

    /// True when `producerID` is mirrored from pipe `pipeID` (it came from that pipe's far side). On
    /// the loop thread.
    public func isPipedProducerOnLoop(pipeID: String, producerID: String) -> Bool {
        loop.assertInLoop()
        return pipes[pipeID]?.mirrored[producerID] != nil
    }

    /// Closes the mirrored producers of pipe `pipeID` that no local subscriber consumes any more
    /// (an edge's last member of a stage track left); returns their ids. On the loop thread.
    @discardableResult
    public func closeUnusedPipedProducersOnLoop(pipeID: String) -> [String] {
        loop.assertInLoop()
        guard let pipe = pipes[pipeID] else { return [] }
        let unused = pipe.mirrored.values.filter { $0.consumers.isEmpty }
        for producer in unused { removeProducer(producer) }
        return unused.map(\.id).sorted()
    }

    /// Closes pipe `id`: its mirrored producers close (removed from their subscribers), the
    /// producers it sent are tapped no more, its socket closes. On the loop thread.
    public func closePipeOnLoop(id: String) {
        loop.assertInLoop()
        guard let pipe = pipes.removeValue(forKey: id) else { return }
        for producer in Array(pipe.mirrored.values) { removeProducer(producer) }
        loop.removeTicker(pipe)
        pipe.close()
    }
}

import RTCWire
import Testing

@testable import RTC

/// The transport's listener alone: synthetic packets from real senders, m-lines built by hand, no
/// socket, no SRTP, no SDP.
@Suite struct RTPStreamListenerTests {
    /// A receiving m-line as negotiation would leave it.
    func route(
        _ kind: MediaKind, mid: String, payloadType: UInt8, rtx: UInt8? = nil, ssrcs: [UInt32] = [],
        rtxSSRCs: [UInt32: UInt32] = [:], direction: SDPDirection = .recvonly
    ) -> RTPTransceiver {
        let t = RTPTransceiver(kind: kind, direction: direction, sendRIDs: [])
        t.mid = mid
        t.currentDirection = direction
        t.payloadType = payloadType
        t.rtxPayloadType = rtx
        t.remoteSSRCs = ssrcs
        t.remoteRTXSSRCs = rtxSSRCs
        return t
    }

    func listener(maxSSRCs: Int = 16) -> RTPStreamListener {
        let l = RTPStreamListener(maxSSRCs: maxSSRCs)
        l.midExtensionID = 1
        l.ridExtensionID = 2
        l.repairedRIDExtensionID = 3
        return l
    }

    /// A sender of a remote encoding; its packets carry mid, rid and (for RTX) repaired-rid.
    func sender(
        ssrc: UInt32, payloadType: UInt8 = 96, codec: MediaCodec = .vp8, rtx: (UInt8, UInt32)? = nil,
        mid: String?, rid: String?
    ) -> RTPSender {
        RTPSender(
            ssrc: ssrc, payloadType: payloadType, codec: codec, rtx: rtx,
            extensions: RTPSendExtensions(
                mid: mid == nil ? nil : 1, rid: rid == nil ? nil : 2, repairedRID: rid == nil ? nil : 3),
            mid: mid, rid: rid, cname: "c", initialSequenceNumber: 100, seed: 1)
    }

    func firstPacket(_ s: RTPSender, codec: MediaCodec = .vp8) -> [UInt8] {
        var out: [[UInt8]] = []
        let frame =
            codec == .vp8
            ? FakeVP8.frame(0) : EncodedFrame(codec: .opus, data: [0x78, 1, 2], timestamp: 0, isKeyframe: true)
        s.send(frame, now: 0) { b, n in out.append(Array(UnsafeRawBufferPointer(rebasing: b[0..<n]))) }
        return out[0]
    }

    func resend(_ s: RTPSender, _ seq: UInt16) -> [UInt8] {
        var out: [UInt8] = []
        s.handleNACK(sequenceNumbers: [seq], now: 1_000_000) { b, n in
            out = Array(UnsafeRawBufferPointer(rebasing: b[0..<n]))
        }
        return out
    }

    func route(_ l: RTPStreamListener, _ bytes: [UInt8], _ routes: [RTPTransceiver]) throws -> RTPStreamListener.Stream?
    {
        try bytes.withUnsafeBytes { p in l.stream(for: p, header: try RTPHeader.parse(p), routes: routes) }
    }

    @Test func midAndRidPickTheMLineAndTheEncoding() throws {
        let audio = route(.audio, mid: "0", payloadType: 111)
        let video = route(.video, mid: "1", payloadType: 96, rtx: 97)
        let routes = [audio, video]
        let l = listener()
        let high = sender(ssrc: 0xA1, rtx: (97, 0xB1), mid: "1", rid: "h")
        let low = sender(ssrc: 0xA2, rtx: (97, 0xB2), mid: "1", rid: "l")
        let mic = sender(ssrc: 0xA3, payloadType: 111, codec: .opus, mid: "0", rid: nil)
        let h = try #require(try route(l, firstPacket(high), routes))
        let lo = try #require(try route(l, firstPacket(low), routes))
        let m = try #require(try route(l, firstPacket(mic, codec: .opus), routes))
        #expect(h.transceiver === video && h.rid == "h" && h.receiver.ssrc == 0xA1)
        #expect(lo.transceiver === video && lo.rid == "l")
        #expect(m.transceiver === audio && m.rid == nil && m.receiver.codec == .opus)
        #expect(l.streams.count == 3)
        // The next packet of a bound SSRC finds the same stream by SSRC alone.
        #expect(try route(l, firstPacket(high), []) === h)
        // An RTX packet with repaired-rid joins the primary stream of that rid.
        let repair = resend(low, 100)
        #expect(try route(l, repair, routes) === lo)
        #expect(l.bySSRC[0xB2] === lo && lo.receiver.rtxSSRC == 0xB2)
        #expect(l.streams.count == 3, "a repair stream is not a new stream")
    }

    @Test func aRepairBeforeItsPrimaryIsNotBound() throws {
        let video = route(.video, mid: "1", payloadType: 96, rtx: 97)
        let l = listener()
        let s = sender(ssrc: 0xA1, rtx: (97, 0xB1), mid: "1", rid: "h")
        _ = firstPacket(s)
        #expect(try route(l, resend(s, 100), [video]) == nil)
        #expect(l.bySSRC.isEmpty)
    }

    @Test func withoutExtensionsAnnouncedSSRCsThenThePayloadTypeDecide() throws {
        let audio = route(.audio, mid: "0", payloadType: 111)
        let video = route(.video, mid: "1", payloadType: 96, rtx: 97, ssrcs: [0xC1], rtxSSRCs: [0xD1: 0xC1])
        let routes = [audio, video]
        let l = listener()
        // An announced RTX SSRC first: its primary stream is created and both map to it.
        let rtxFirst = sender(ssrc: 0xC1, rtx: (97, 0xD1), mid: nil, rid: nil)
        _ = firstPacket(rtxFirst)
        let viaRTX = try #require(try route(l, resend(rtxFirst, 100), routes))
        #expect(viaRTX.transceiver === video && viaRTX.receiver.ssrc == 0xC1)
        #expect(try route(l, firstPacket(rtxFirst), routes) === viaRTX)
        // Unannounced, no extension: the payload type picks the m-line.
        let unannounced = sender(ssrc: 0xE1, payloadType: 111, codec: .opus, mid: nil, rid: nil)
        #expect(try route(l, firstPacket(unannounced, codec: .opus), routes)?.transceiver === audio)
        // A payload type no m-line receives: dropped.
        let stranger = sender(ssrc: 0xF1, payloadType: 100, mid: nil, rid: nil)
        #expect(try route(l, firstPacket(stranger), routes) == nil)
    }

    @Test func aSendOnlyMLineReceivesNothingAndTheSSRCTableIsBounded() throws {
        let sendOnly = route(.video, mid: "1", payloadType: 96, direction: .sendonly)
        let l = listener(maxSSRCs: 2)
        #expect(try route(l, firstPacket(sender(ssrc: 1, mid: "1", rid: nil)), [sendOnly]) == nil)
        let video = route(.video, mid: "1", payloadType: 96)
        var created: [UInt32] = []
        l.onNewStream = { created.append($0.receiver.ssrc) }
        for ssrc in UInt32(1)...4 {
            _ = try route(l, firstPacket(sender(ssrc: ssrc, mid: "1", rid: nil)), [video])
        }
        #expect(created == [1, 2], "new SSRCs past the limit are dropped, and the owner hears of each new stream")
        #expect(l.bySSRC.count == 2)
    }

    @Test func aStoppedMLineLetsItsStreamsGoAndBindsNoNewOne() throws {
        let audio = route(.audio, mid: "0", payloadType: 111)
        let video = route(.video, mid: "1", payloadType: 96, rtx: 97)
        let routes = [audio, video]
        let l = listener()
        let high = sender(ssrc: 0xA1, rtx: (97, 0xB1), mid: "1", rid: "h")
        let low = sender(ssrc: 0xA2, mid: "1", rid: "l")
        let mic = sender(ssrc: 0xA3, payloadType: 111, codec: .opus, mid: "0", rid: nil)
        weak var dropped: RTPReceiver?
        do {
            let h = try #require(try route(l, firstPacket(high), routes))
            dropped = h.receiver
            _ = try #require(try route(l, resend(high, 100), routes), "the RTX SSRC binds to its primary")
            _ = try #require(try route(l, firstPacket(low), routes))
            _ = try #require(try route(l, firstPacket(mic, codec: .opus), routes))
            #expect(l.bySSRC.count == 4 && l.streams.count == 3)
            // The last SSRC looked up stays cached: it must be forgotten with its stream.
            #expect(l.boundStream(0xA1) != nil)
        }
        l.stopReceiving(on: video)
        #expect(dropped == nil, "the receiver (and its reorder buffer) is freed")
        #expect(l.streams.map(\.receiver.ssrc) == [0xA3] && Set(l.bySSRC.keys) == [0xA3])
        #expect(l.boundStream(0xA1) == nil && l.boundStream(0xA2) == nil)
        // Packets that still come for the stopped m-line, old SSRC or new, bind nothing.
        #expect(try route(l, firstPacket(high), routes) == nil)
        let another = sender(ssrc: 0xC1, mid: "1", rid: "h")
        #expect(try route(l, firstPacket(another), routes) == nil)
        // The other m-line is untouched.
        #expect(try route(l, firstPacket(mic, codec: .opus), routes)?.transceiver === audio)
    }

    @Test func aNewRemoteDescriptionEndsTheStreamsOfTracksItEnded() throws {
        // An SFU's subscribe offers: m-line 1 goes inactive (its consumer closed); m-line 2 keeps
        // receiving but carries another track (new announced SSRC); m-line 3 is unchanged, and its
        // sender was bound by mid before announcing anything.
        let ended = route(.video, mid: "1", payloadType: 96, ssrcs: [0xA1])
        let moved = route(.audio, mid: "2", payloadType: 111, ssrcs: [0xA2])
        let kept = route(.video, mid: "3", payloadType: 96, ssrcs: [0xA3])
        let routes = [ended, moved, kept]
        let l = listener()
        _ = try #require(try route(l, firstPacket(sender(ssrc: 0xA1, mid: "1", rid: nil)), routes))
        _ = try #require(
            try route(
                l, firstPacket(sender(ssrc: 0xA2, payloadType: 111, codec: .opus, mid: "2", rid: nil), codec: .opus),
                routes))
        _ = try #require(try route(l, firstPacket(sender(ssrc: 0xA3, mid: "3", rid: nil)), routes))
        _ = try #require(try route(l, firstPacket(sender(ssrc: 0xA4, mid: "3", rid: nil)), routes))
        #expect(l.streams.count == 4)
        let before = Dictionary(uniqueKeysWithValues: routes.map { (ObjectIdentifier($0), $0.remoteSSRCs) })
        ended.currentDirection = .inactive
        moved.remoteSSRCs = [0xB2]
        l.endStreams(announcedBefore: before)
        #expect(l.streams.map(\.receiver.ssrc) == [0xA3, 0xA4], "only m-line 3's streams remain")
        #expect(l.boundStream(0xA1) == nil && l.boundStream(0xA2) == nil && l.bySSRC.count == 2)
        // The moved m-line binds its new track; the ended one binds nothing until it receives again.
        let next = try #require(
            try route(
                l, firstPacket(sender(ssrc: 0xB2, payloadType: 111, codec: .opus, mid: "2", rid: nil), codec: .opus),
                routes))
        #expect(next.transceiver === moved && next.receiver.ssrc == 0xB2)
        #expect(try route(l, firstPacket(sender(ssrc: 0xA1, mid: "1", rid: nil)), routes) == nil)
        ended.currentDirection = .recvonly
        #expect(try route(l, firstPacket(sender(ssrc: 0xA1, mid: "1", rid: nil)), routes)?.transceiver === ended)
        // Unchanged announcements end nothing.
        let now = Dictionary(uniqueKeysWithValues: routes.map { (ObjectIdentifier($0), $0.remoteSSRCs) })
        l.endStreams(announcedBefore: now)
        #expect(l.streams.count == 4)
    }
}

import Foundation
import RTCWire
import TestSupport
import Testing

@testable import RTC

/// RFC 8285 §5 and JSEP 5.3.1: each m-section of an answer lists only the header extensions that
/// the same section of the offer listed, with the offer's id; and each sender writes only those of
/// its own section. Firefox refuses an answer that breaks this ("Answer has extmap … at level 1 that
/// was not present in offer").
@Suite(.serialized) struct PeerConnectionExtensionTests {
    /// Firefox ESR 153's offer from `pages/peer.html` (send and receive, VP8 preferred), captured in
    /// a test namespace and trimmed to one candidate per section: abs-send-time is in the video
    /// section only, and transport-cc has id 7.
    static let firefoxOffer = """
        v=0
        o=mozilla...THIS_IS_SDPARTA-99.0 3244665915258928818 0 IN IP4 0.0.0.0
        s=-
        t=0 0
        a=sendrecv
        a=fingerprint:sha-256 56:E2:C9:1F:EC:95:4B:AD:29:68:D9:92:52:DB:33:A4:0A:F9:78:D2:01:B5:67:A0:01:29:B5:A7:6E:CD:B7:4D
        a=group:BUNDLE 0 1
        a=ice-options:trickle
        a=msid-semantic:WMS *
        m=audio 58948 UDP/TLS/RTP/SAVPF 109
        c=IN IP4 127.0.0.1
        a=candidate:0 1 UDP 2122187007 127.0.0.1 58948 typ host
        a=sendrecv
        a=end-of-candidates
        a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level
        a=extmap:2/recvonly urn:ietf:params:rtp-hdrext:csrc-audio-level
        a=extmap:3 urn:ietf:params:rtp-hdrext:sdes:mid
        a=extmap:7 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
        a=extmap-allow-mixed
        a=fmtp:109 maxplaybackrate=48000;stereo=1;useinbandfec=1
        a=ice-pwd:d5d7df78b5952e80a6d42fbb4b24c688
        a=ice-ufrag:f5a34d3b
        a=mid:0
        a=msid:{61e69fb4-c68a-4163-bb18-00653d51ce84} {4702089d-77fe-4c07-bb9e-243d0f2555d3}
        a=rtcp:37128 IN IP4 127.0.0.1
        a=rtcp-fb:109 transport-cc
        a=rtcp-mux
        a=rtpmap:109 opus/48000/2
        a=setup:actpass
        a=ssrc:3403643500 cname:{68c8226c-4075-4adf-a6d3-c5f4947a0d11}
        m=video 36872 UDP/TLS/RTP/SAVPF 120 124
        c=IN IP4 127.0.0.1
        a=candidate:0 1 UDP 2122187007 127.0.0.1 36872 typ host
        a=sendrecv
        a=end-of-candidates
        a=extmap:3 urn:ietf:params:rtp-hdrext:sdes:mid
        a=extmap:4 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
        a=extmap:5 urn:ietf:params:rtp-hdrext:toffset
        a=extmap:6/recvonly http://www.webrtc.org/experiments/rtp-hdrext/playout-delay
        a=extmap:7 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
        a=extmap-allow-mixed
        a=fmtp:120 max-fs=12288;max-fr=60
        a=fmtp:124 apt=120
        a=ice-pwd:d5d7df78b5952e80a6d42fbb4b24c688
        a=ice-ufrag:f5a34d3b
        a=mid:1
        a=msid:{61e69fb4-c68a-4163-bb18-00653d51ce84} {551a6d36-73c2-4f70-89a8-e9224f8e8248}
        a=rtcp:38962 IN IP4 127.0.0.1
        a=rtcp-fb:120 nack
        a=rtcp-fb:120 nack pli
        a=rtcp-fb:120 ccm fir
        a=rtcp-fb:120 goog-remb
        a=rtcp-fb:120 transport-cc
        a=rtcp-mux
        a=rtcp-rsize
        a=rtpmap:120 VP8/90000
        a=rtpmap:124 rtx/90000
        a=setup:actpass
        a=ssrc:1842008253 cname:{68c8226c-4075-4adf-a6d3-c5f4947a0d11}
        a=ssrc:3111278303 cname:{68c8226c-4075-4adf-a6d3-c5f4947a0d11}
        a=ssrc-group:FID 1842008253 3111278303
        """

    static func extmaps(_ m: MediaDescription) -> [String: UInt8] {
        Dictionary(
            m.extmaps.map { ($0.uri, UInt8(truncatingIfNeeded: $0.id)) }, uniquingKeysWith: { first, _ in first })
    }

    static func section(_ d: SessionDescription, _ kind: MediaKind) throws -> MediaDescription {
        try #require(d.media.first { $0.kind == kind })
    }

    static let absSendTime = RTPExtensionURI.absSendTime
    static let mid = RTPExtensionURI.mid
    static let audioLevel = RTPExtensionURI.audioLevel
    static let transportCC = RTPExtensionURI.transportWideCC

    @Test func answerToFirefoxKeepsEachSectionsOwnExtensions() async throws {
        let pc = try PeerConnection(loop: EventLoop(name: "ext-answer"))
        defer { Task { await shutdown(pc) } }
        let offer = try SessionDescription.parse(Self.firefoxOffer.replacingOccurrences(of: "\n", with: "\r\n"))
        let (answer, audio, video) = try await pc.loop.submit {
            () throws -> (SessionDescription, RTPTransceiver, RTPTransceiver) in
            let audio = pc.addTransceiver(kind: .audio, direction: .sendrecv)
            let video = pc.addTransceiver(kind: .video, direction: .sendrecv)
            try pc.setRemoteDescription(offer, type: .offer)
            return (try pc.createAnswer(), audio, video)
        }
        let offeredAudio = Self.extmaps(try Self.section(offer, .audio))
        let offeredVideo = Self.extmaps(try Self.section(offer, .video))
        let answeredAudio = Self.extmaps(try Self.section(answer, .audio))
        let answeredVideo = Self.extmaps(try Self.section(answer, .video))
        #expect(answeredAudio[Self.absSendTime] == nil, "audio answer lists abs-send-time: \(answeredAudio)")
        #expect(answeredVideo[Self.absSendTime] == 4)
        // Every answered extension is one the same section offered, with the offered id.
        for (uri, id) in answeredAudio { #expect(offeredAudio[uri] == id, "audio \(uri) \(id)") }
        for (uri, id) in answeredVideo { #expect(offeredVideo[uri] == id, "video \(uri) \(id)") }
        #expect(answeredAudio[Self.mid] == 3 && answeredVideo[Self.mid] == 3)
        #expect(answeredAudio[Self.audioLevel] == 1 && answeredVideo[Self.audioLevel] == nil)
        if LocalCapabilities.isSupported(uri: Self.transportCC) {
            #expect(answeredAudio[Self.transportCC] == 7 && answeredVideo[Self.transportCC] == 7)
        }
        // Unsupported ones (csrc-audio-level, toffset, playout-delay) are left out.
        #expect(Set(answeredAudio.keys).union(answeredVideo.keys).allSatisfy { LocalCapabilities.isSupported(uri: $0) })

        // The senders write their own section's extensions.
        let (audioExts, videoExts, audioID, connectionID) = await pc.loop.submit {
            (
                audio.primarySender?.extensions, video.primarySender?.extensions,
                audio.negotiatedExtensionID(Self.absSendTime), pc.negotiatedExtensionID(Self.absSendTime)
            )
        }
        let a = try #require(audioExts)
        let v = try #require(videoExts)
        #expect(a.absSendTime == nil && a.audioLevel == 1 && a.mid == 3)
        #expect(v.absSendTime == 4 && v.audioLevel == nil && v.mid == 3)
        #expect(audioID == nil)
        #expect(connectionID == 4, "the connection still knows abs-send-time's id for the receive path")
    }

    /// `goog-remb` is answered where offered; REMB is sent only when transport-cc is not negotiated
    /// (a sender with both runs its own estimator).
    @Test func rembIsAnsweredAndSentOnlyWithoutTransportCC() async throws {
        let withCC = Self.firefoxOffer.replacingOccurrences(of: "\n", with: "\r\n")
        let withoutCC = withCC.split(separator: "\r\n", omittingEmptySubsequences: false)
            .filter { !$0.contains("transport-wide-cc") && !$0.contains("transport-cc") }
            .joined(separator: "\r\n")
        for (text, expectREMB) in [(withCC, !LocalCapabilities.isSupported(uri: Self.transportCC)), (withoutCC, true)] {
            let pc = try PeerConnection(loop: EventLoop(name: "remb-answer"))
            let offer = try SessionDescription.parse(text)
            let (answer, sendsREMB) = try await pc.loop.submit { () throws -> (SessionDescription, Bool) in
                _ = pc.addTransceiver(kind: .audio, direction: .sendrecv)
                _ = pc.addTransceiver(kind: .video, direction: .sendrecv)
                try pc.setRemoteDescription(offer, type: .offer)
                return (try pc.createAnswer(), pc.transport.sendsREMB)
            }
            let video = try Self.section(answer, .video)
            #expect(video.codecs.first?.feedback.contains(.googREMB) == true)
            #expect(sendsREMB == expectREMB)
            await shutdown(pc)
        }
    }

    /// RFC 8285 §6: an extension offered with a direction is answered with the reverse one, and
    /// one the offerer only sends is not written on our packets.
    @Test func anExtensionOfferedWithADirectionIsAnsweredTheOtherWay() async throws {
        let pc = try PeerConnection(loop: EventLoop(name: "ext-direction"))
        defer { Task { await shutdown(pc) } }
        let text = Self.firefoxOffer.replacingOccurrences(of: "\n", with: "\r\n").replacingOccurrences(
            of: "a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level",
            with: "a=extmap:1/sendonly urn:ietf:params:rtp-hdrext:ssrc-audio-level")
        let offer = try SessionDescription.parse(text)
        #expect(try Self.section(offer, .audio).extmaps.contains { $0.direction == .sendonly })
        let (answer, audio) = try await pc.loop.submit { () throws -> (SessionDescription, RTPTransceiver) in
            let audio = pc.addTransceiver(kind: .audio, direction: .sendrecv)
            try pc.setRemoteDescription(offer, type: .offer)
            return (try pc.createAnswer(), audio)
        }
        let level = try #require(try Self.section(answer, .audio).extmaps.first { $0.uri == Self.audioLevel })
        #expect(level.id == 1 && level.direction == .recvonly, "\(level)")
        #expect(Self.extmaps(try Self.section(answer, .audio))[Self.mid] == 3)
        #expect(!answer.serialize().contains("a=extmap:3/"), "a two-way extension is answered without a direction")
        let sent = await pc.loop.submit { audio.primarySender?.extensions.audioLevel }
        #expect(sent == nil, "the offerer only sends ssrc-audio-level: our packets do not carry it")
    }

    /// Firefox ESR 153's simulcast offer (room page, `?simulcast=1`, a 640x480 camera in two
    /// layers) lists the rid extensions `sendonly` and announces no SSRC for its layers: the
    /// answer must keep them (answered `recvonly`), or its packets carry no rid and no layer can be
    /// told apart (issue 33: "a Firefox simulcast host reaches the SFU with no video").
    @Test func firefoxSimulcastOfferKeepsItsRIDExtensions() async throws {
        let pc = try PeerConnection(loop: EventLoop(name: "ext-ff-simulcast"))
        defer { Task { await shutdown(pc) } }
        var lines: [String] = []
        for line in Self.firefoxOffer.split(separator: "\n").map(String.init) {
            if line.hasPrefix("a=ssrc") && lines.contains("m=video 36872 UDP/TLS/RTP/SAVPF 120 124") { continue }
            lines.append(line)
            if line == "a=extmap:7 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"
                && lines.contains("m=video 36872 UDP/TLS/RTP/SAVPF 120 124")
            {
                lines += [
                    "a=extmap:9/sendonly urn:ietf:params:rtp-hdrext:sdes:rtp-stream-id",
                    "a=extmap:10/sendonly urn:ietf:params:rtp-hdrext:sdes:repaired-rtp-stream-id",
                    "a=rid:h send", "a=rid:f send", "a=simulcast:send h;f",
                ]
            }
        }
        let offer = try SessionDescription.parse(lines.joined(separator: "\r\n") + "\r\n")
        let (answer, video, listenerRID, listenerRepaired) = try await pc.loop.submit {
            () throws -> (SessionDescription, RTPTransceiver, UInt8, UInt8) in
            _ = pc.addTransceiver(kind: .audio, direction: .recvonly)
            let video = pc.addTransceiver(kind: .video, direction: .recvonly)
            try pc.setRemoteDescription(offer, type: .offer)
            let answer = try pc.createAnswer()
            return (
                answer, video, pc.transport.listener.ridExtensionID, pc.transport.listener.repairedRIDExtensionID
            )
        }
        let section = try Self.section(answer, .video)
        let rid = try #require(section.extmaps.first { $0.uri == RTPExtensionURI.rtpStreamID }, "\(section.extmaps)")
        #expect(rid.id == 9 && rid.direction == .recvonly)
        let repaired = try #require(section.extmaps.first { $0.uri == RTPExtensionURI.repairedRTPStreamID })
        #expect(repaired.id == 10 && repaired.direction == .recvonly)
        #expect(answer.serialize().contains("a=simulcast:recv h;f"))
        // The receive path reads the layers' rid with the offered ids.
        #expect(listenerRID == 9 && listenerRepaired == 10)
        let rids = await pc.loop.submit { video.remoteRIDs }
        #expect(rids == ["h", "f"])
    }

    @Test func offererSendsOnlyWhatEachAnsweredSectionKept() async throws {
        let tx = try PeerConnection(loop: EventLoop(name: "ext-tx"))
        let rx = try PeerConnection(loop: EventLoop(name: "ext-rx"))
        defer { Task { await shutdown(tx, rx) } }
        let (audio, video) = await tx.loop.submit {
            (
                tx.addTransceiver(kind: .audio, direction: .sendonly),
                tx.addTransceiver(kind: .video, direction: .sendonly)
            )
        }
        let offer = try await tx.loop.submit {
            let o = try tx.createOffer()
            try tx.setLocalDescription(o)
            return o
        }
        let offeredAudioSendTime = try #require(Self.extmaps(try Self.section(offer, .audio))[Self.absSendTime])
        let offeredVideoSendTime = try #require(Self.extmaps(try Self.section(offer, .video))[Self.absSendTime])
        let ourAnswer = try await rx.loop.submit {
            try rx.setRemoteDescription(offer, type: .offer)
            return try rx.createAnswer()
        }
        // An answerer that keeps abs-send-time for video only (as Firefox does), and answers
        // abs-capture-time in the audio section with an id the offer did not give it there (the
        // answer may not; the extension is then not used in that section).
        let captureTime = RTPExtensionURI.absCaptureTime
        let offeredVideoCaptureTime = try #require(Self.extmaps(try Self.section(offer, .video))[captureTime])
        var lines: [String] = []
        var inAudio = false
        for line in ourAnswer.serialize().split(separator: "\r\n", omittingEmptySubsequences: true).map(String.init) {
            if line.hasPrefix("m=") { inAudio = line.hasPrefix("m=audio") }
            if inAudio && line.hasSuffix(" " + Self.absSendTime) { continue }
            if inAudio && line.hasPrefix("a=extmap:") && line.hasSuffix(" " + captureTime) {
                lines.append("a=extmap:13 " + captureTime)
                continue
            }
            lines.append(line)
        }
        let edited = try SessionDescription.parse(lines.joined(separator: "\r\n") + "\r\n")
        try await tx.loop.submit { try tx.setRemoteDescription(edited, type: .answer) }
        let (audioExts, videoExts, audioSender) = await tx.loop.submit {
            (audio.primarySender?.extensions, video.primarySender?.extensions, audio.primarySender)
        }
        let a = try #require(audioExts)
        let v = try #require(videoExts)
        #expect(a.absSendTime == nil, "abs-send-time was not kept in the audio section")
        #expect(a.absCaptureTime == nil, "abs-capture-time was answered with another id in the audio section")
        #expect(v.absSendTime == offeredVideoSendTime)
        #expect(v.absCaptureTime == offeredVideoCaptureTime)
        #expect(a.audioLevel != nil && a.mid != nil)

        // A packet of the audio sender carries no abs-send-time element.
        let sender = try #require(audioSender)
        final class Seen: @unchecked Sendable { var ids: [UInt8: Bool] = [:] }
        let seen = Seen()
        await tx.loop.submit {
            sender.send(
                EncodedFrame(codec: .opus, data: [0xF8, 0xFF, 0xFE], timestamp: 960, isKeyframe: true),
                now: EventLoop.now()
            ) { buffer, length in
                let packet = UnsafeRawBufferPointer(rebasing: buffer[0..<length])
                guard let header = try? RTPHeader.parse(packet) else { return }
                for id in UInt8(1)...14 {
                    if header.extensionElement(id: id, in: packet) != nil { seen.ids[id] = true }
                }
            }
        }
        #expect(seen.ids[offeredAudioSendTime] == nil, "audio packet carries abs-send-time: \(seen.ids)")
        #expect(seen.ids[try #require(a.audioLevel)] == true, "audio packet lacks audio-level: \(seen.ids)")

        // A new offer may offer abs-send-time in audio again, with the same id (BUNDLE: one id per uri).
        let reoffer = try await tx.loop.submit { try tx.createOffer() }
        #expect(Self.extmaps(try Self.section(reoffer, .audio))[Self.absSendTime] == offeredAudioSendTime)
        // Its answer kept it this time: the existing audio sender writes it from now on.
        try await tx.loop.submit { try tx.setLocalDescription(reoffer) }
        let reanswer = try await rx.loop.submit {
            try rx.setRemoteDescription(reoffer, type: .offer)
            return try rx.createAnswer()
        }
        try await tx.loop.submit { try tx.setRemoteDescription(reanswer, type: .answer) }
        let renegotiated = await tx.loop.submit { (audio.primarySender === sender, sender.extensions.absSendTime) }
        #expect(renegotiated.0, "the sender is kept across the renegotiation")
        #expect(renegotiated.1 == offeredAudioSendTime)
    }
}

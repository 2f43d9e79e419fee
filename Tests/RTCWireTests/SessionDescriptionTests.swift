import Foundation
import Testing

@testable import RTCWire

private func crlf(_ text: String) -> String {
    text.replacingOccurrences(of: "\n", with: "\r\n")
}

private func lines(_ text: String) -> [String] {
    text.components(separatedBy: "\r\n").filter { !$0.isEmpty }
}

/// `/work/shared/data/sdp` as seen from this file: CI places `shared/` beside the clone.
private let sharedVectorDirectory = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("shared/data/sdp")

@Suite("SDP vectors")
struct SDPVectorTests {
    @Test("every captured vector parses and serializes back byte for byte", arguments: SDPTestVectors.all.map(\.name))
    func exactRoundTrip(name: String) throws {
        let text = try #require(SDPTestVectors.all.first { $0.name == name }?.text)
        let original = crlf(text)
        let parsed = try SessionDescription.parse(original)
        let serialized = parsed.serialize()
        #expect(lines(serialized) == lines(original))
        #expect(serialized == original)
        #expect(try SessionDescription.parse(serialized) == parsed)
        // LF input yields the same model.
        #expect(try SessionDescription.parse(text) == parsed)
        #expect(parsed.media.count == 2)
        #expect(parsed.bundleGroup == ["0", "1"])
    }

    @Test("the files in shared/data/sdp (when present) match the embedded copies and round-trip")
    func sharedDirectory() throws {
        guard let files = try? FileManager.default.contentsOfDirectory(atPath: sharedVectorDirectory.path) else {
            return  // not checked out beside this clone
        }
        #expect(files.filter { $0.hasSuffix(".sdp") }.count >= SDPTestVectors.all.count)
        for file in files where file.hasSuffix(".sdp") {
            let text = try String(contentsOf: sharedVectorDirectory.appendingPathComponent(file), encoding: .utf8)
            let parsed = try SessionDescription.parse(text)
            #expect(parsed.serialize() == text, "\(file)")
            if let embedded = SDPTestVectors.all.first(where: { $0.name == file }) {
                #expect(crlf(embedded.text) == text, "\(file) differs from the embedded copy")
            }
        }
    }

    @Test func chromiumSimulcastOffer() throws {
        let sdp = try SessionDescription.parse(SDPTestVectors.chromium156OfferSimulcastSendonly)
        #expect(sdp.extmapAllowMixed)
        #expect(!sdp.iceLite)
        #expect(sdp.msidSemantic == SDPMsidSemantic(semantic: "WMS", identifiers: []))
        #expect(sdp.origin.sessionID == "4774237370221024595")
        #expect(sdp.origin.sessionVersion == 2)

        let audio = sdp.media[0]
        #expect(audio.type == .audio && audio.kind == .audio)
        #expect(audio.direction == .sendonly)
        #expect(audio.msid == SDPMsid(streamID: "-", trackID: "b986eac5-3381-4dcf-8f4f-479a90858d0b"))
        #expect(audio.ssrcs == [438_245_661])
        #expect(audio.cname(for: 438_245_661) == "Da25xRKaMD2b8yT6")

        let video = sdp.media[1]
        #expect(video.type == .video)
        #expect(video.port == 56250)
        #expect(video.mid == "1")
        #expect(video.rids.map(\.id) == ["q", "h", "f"])
        #expect(video.rids.allSatisfy { $0.direction == .send && $0.parameters.isEmpty })
        let simulcast = try #require(video.simulcast)
        #expect(simulcast.sendRIDs == ["q", "h", "f"])
        #expect(simulcast.send.allSatisfy { $0.count == 1 && !$0[0].paused })
        #expect(simulcast.receive.isEmpty)
        #expect(video.extensionID(for: "urn:ietf:params:rtp-hdrext:sdes:mid") == 4)
        #expect(video.extensionID(for: "urn:ietf:params:rtp-hdrext:sdes:rtp-stream-id") == 10)
        #expect(video.extensionID(for: "urn:ietf:params:rtp-hdrext:sdes:repaired-rtp-stream-id") == 11)
        #expect(
            video.extensionID(
                for:
                    "https://aomediacodec.github.io/av1-rtp-spec/#dependency-descriptor-rtp-header-extension") == 12)
        #expect(video.extensionID(for: "urn:example:absent") == nil)
        #expect(video.ssrcs.isEmpty)
        #expect(video.ssrcGroups.isEmpty)
    }

    @Test func chromiumSendrecvOffer() throws {
        let sdp = try SessionDescription.parse(crlf(SDPTestVectors.chromium156OfferSendrecv))
        #expect(sdp.msidSemantic?.identifiers == ["30124d5f-6377-4e3b-b69a-aea2f630bb9a"])

        let audio = sdp.media[0]
        #expect(audio.formats == ["111", "63", "9", "0", "8", "13", "110", "126"])
        #expect(audio.connection == SDPConnection(address: "127.0.0.1"))
        #expect(audio.iceUfrag == "TCmf")
        #expect(audio.icePwd == "KOXh4agDYkH+6Mglwol4gxi4")
        #expect(audio.iceOptions == ["trickle"])
        #expect(audio.setup == .actpass)
        #expect(audio.rtcpMux && audio.rtcpRsize)
        #expect(!audio.endOfCandidates)
        #expect(audio.attributeValue(named: "rtcp") == "9 IN IP4 0.0.0.0")
        #expect(audio.attributeValue(named: "rtcp-xr") == "rcvr-rtt=all")

        let fingerprint = try #require(audio.fingerprint)
        #expect(fingerprint.algorithm == "sha-256")
        #expect(fingerprint.bytes?.count == 32)
        #expect(fingerprint.bytes?.first == 0x18 && fingerprint.bytes?.last == 0xA4)

        let opus = try #require(audio.codec(payloadType: 111))
        #expect(opus.hasName("OPUS") && opus.mediaCodec == .opus)
        #expect(opus.clockRate == 48000 && opus.channels == 2)
        #expect(
            opus.parameters == [
                SDPParameter(key: "minptime", value: "10"),
                SDPParameter(key: "useinbandfec", value: "1"),
            ])
        #expect(opus.feedback == [.transportCC])
        #expect(audio.codec(payloadType: 63)?.parameters == [SDPParameter(key: "111/111")])
        #expect(audio.codec(payloadType: 9)?.channels == nil)
        #expect(audio.codecs.map(\.payloadType) == [111, 63, 9, 0, 8, 13, 110, 126])

        #expect(audio.candidates.count == 2)
        let udp = audio.candidates[0]
        #expect(udp.foundation == "2027105895" && udp.component == 1 && udp.transport == "udp")
        #expect(udp.priority == 2_122_260_223 && udp.address == "127.0.0.1" && udp.port == 36091)
        #expect(udp.type == "host" && udp.relatedAddress == nil && udp.relatedPort == nil)
        #expect(
            udp.extensions == [
                .init(key: "generation", value: "0"), .init(key: "network-id", value: "1"),
                .init(key: "network-cost", value: "50"),
            ])
        let tcp = audio.candidates[1]
        #expect(tcp.transport == "tcp" && tcp.port == 9 && tcp.value(forExtension: "tcptype") == "active")

        let video = sdp.media[1]
        #expect(video.fidSSRCs?.primary == 1_344_066_152 && video.fidSSRCs?.rtx == 650_572_485)
        #expect(video.rtxSSRC(for: 1_344_066_152) == 650_572_485)
        #expect(video.rtxSSRC(for: 650_572_485) == nil)
        #expect(video.primarySSRC == 1_344_066_152)
        #expect(video.ssrcs == [1_344_066_152, 650_572_485])
        #expect(video.ssrcAttributes.count == 4)
        #expect(
            video.ssrcAttributes[1]
                == SDPSSRCAttribute(
                    ssrc: 1_344_066_152, attribute: "msid",
                    value: "30124d5f-6377-4e3b-b69a-aea2f630bb9a d14f44ca-67c9-4eca-94f6-a197e5e9d126"))
        let vp8 = try #require(video.codec(named: "vp8"))
        #expect(vp8.payloadType == 96 && vp8.mediaCodec == .vp8 && vp8.clockRate == 90000)
        #expect(vp8.feedback == [.googREMB, .transportCC, .fir, .nack, .pli])
        #expect(video.rtxCodec(for: 96)?.payloadType == 97)
        #expect(video.codec(payloadType: 97)?.associatedPayloadType == 96)
        let h264 = try #require(video.codec(payloadType: 102))
        #expect(h264.parameter("profile-level-id") == "42001f")
        #expect(h264.parameter("packetization-mode") == "1")
        #expect(video.codecs.count == video.formats.count)
        #expect(video.extmaps.first == SDPExtmap(id: 14, uri: "urn:ietf:params:rtp-hdrext:toffset"))
    }

    @Test func chromiumAnswerAndRecvonlyOffer() throws {
        let answer = try SessionDescription.parse(SDPTestVectors.chromium156AnswerRecvonly)
        #expect(answer.media.allSatisfy { $0.direction == .recvonly && $0.setup == .active })
        #expect(answer.media[1].port == 9)
        #expect(answer.media[1].connection?.address == "0.0.0.0")
        #expect(answer.media[1].candidates.isEmpty)
        #expect(answer.media[0].candidates.count == 1)
        #expect(answer.media[1].codec(payloadType: 45)?.parameter("level-idx") == "5")
        #expect(answer.media[1].msid == nil)

        let offer = try SessionDescription.parse(SDPTestVectors.chromium156OfferRecvonly)
        let flexfec = try #require(offer.media[1].codec(payloadType: 49))
        #expect(flexfec.name == "flexfec-03")
        #expect(flexfec.parameters == [SDPParameter(key: "repair-window", value: "10000000")])
        #expect(flexfec.feedback == [.googREMB, .transportCC])
        #expect(offer.media[1].codecs.filter { $0.hasName("VP9") }.map(\.payloadType) == [98, 100, 35, 37])
    }

    @Test func aiortcAnswer() throws {
        let sdp = try SessionDescription.parse(SDPTestVectors.aiortc116AnswerToChromiumOffer)
        #expect(sdp.msidSemantic == SDPMsidSemantic(semantic: "WMS", identifiers: ["*"]))
        let audio = sdp.media[0]
        #expect(audio.fingerprints.map(\.algorithm) == ["sha-256", "sha-384", "sha-512"])
        #expect(audio.fingerprints.map { $0.bytes?.count } == [32, 48, 64])
        #expect(audio.setup == .active && audio.direction == .recvonly)
        #expect(audio.endOfCandidates)
        #expect(audio.candidates.first?.foundation == "16572de626da4e5384a0ce2d0d93678a")
        #expect(audio.candidates.first?.priority == 2_130_706_431)
        #expect(audio.codecs.map(\.name) == ["opus", "G722", "PCMU", "PCMA"])
        #expect(audio.extensionID(for: "urn:ietf:params:rtp-hdrext:sdes:mid") == 4)
        #expect(sdp.media[1].rtxSSRC(for: 2_216_902_814) == 433_154_023)
        #expect(sdp.media[1].codec(payloadType: 97)?.parameters == [SDPParameter(key: "apt", value: "96")])
    }

    @Test func janus() throws {
        let answer = try SessionDescription.parse(SDPTestVectors.janus112VideoroomPublisherAnswer)
        #expect(answer.sessionName == "VideoRoom 1234")
        #expect(!answer.iceLite)  // the captured answer carries no a=ice-lite
        #expect(answer.iceOptions == ["trickle"])
        #expect(answer.fingerprint?.algorithm == "sha-256")
        #expect(answer.media[0].fingerprints.isEmpty)
        #expect(answer.fingerprints(forMediaAt: 0) == answer.fingerprints)
        #expect(answer.setup(forMediaAt: 1) == .active)
        #expect(answer.iceCredentials(forMediaAt: 0)?.ufrag == "TJyK")
        #expect(answer.iceCredentials(forMediaAt: 5) == nil)
        let candidate = try #require(answer.media[0].candidates.first)
        #expect(
            candidate
                == ICECandidate(
                    foundation: "1", component: 1, transport: "udp", priority: 2_015_363_327,
                    address: "127.0.0.2", port: 20177, type: "host"))
        #expect(answer.media[1].msid == SDPMsid(streamID: "janus", trackID: "janus1"))
        #expect(answer.media(mid: "1")?.codecs.map(\.name) == ["VP8", "rtx"])

        let offer = try SessionDescription.parse(SDPTestVectors.janus112VideoroomSubscriberOffer)
        #expect(offer.media[1].fidSSRCs?.primary == 246_457_405 && offer.media[1].fidSSRCs?.rtx == 1_038_605_764)
        #expect(offer.media[0].extensionID(for: "urn:ietf:params:rtp-hdrext:sdes:mid") == 4)
        #expect(offer.media[1].extensionID(for: "http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time") == 2)
        #expect(offer.media.allSatisfy { $0.setup == .actpass && $0.direction == .sendonly })
    }
}

@Suite("SDP model editing")
struct SDPEditingTests {
    @Test("a description built from scratch serializes in WebRTC order and parses back")
    func buildFromScratch() throws {
        var audio = MediaDescription(type: .audio, port: 9, formats: [])
        audio.mid = "0"
        audio.direction = .sendrecv
        audio.iceUfrag = "abcd"
        audio.icePwd = "0123456789abcdefghijkl"
        audio.iceOptions = ["trickle"]
        audio.fingerprint = SDPFingerprint(algorithm: "sha-256", value: "AB:CD")
        audio.setup = .actpass
        audio.rtcpMux = true
        audio.extmaps = [SDPExtmap(id: 1, uri: "urn:ietf:params:rtp-hdrext:sdes:mid")]
        audio.codecs = [
            RTPCodec(
                payloadType: 111, name: "opus", clockRate: 48000, channels: 2,
                parameters: [SDPParameter(key: "minptime", value: "10")],
                feedback: [.transportCC])
        ]
        audio.ssrcAttributes = [SDPSSRCAttribute(ssrc: 42, attribute: "cname", value: "understudy")]
        audio.candidates = [
            ICECandidate(
                foundation: "1", priority: 2_130_706_431, address: "127.0.0.1", port: 5000,
                type: "host")
        ]
        audio.endOfCandidates = true

        var sdp = SessionDescription(origin: SDPOrigin(sessionID: "123", sessionVersion: 1))
        sdp.groups = [SDPGroup(semantics: "BUNDLE", mids: ["0"])]
        sdp.msidSemantic = SDPMsidSemantic(semantic: "WMS", identifiers: ["*"])
        sdp.media = [audio]

        let text = sdp.serialize()
        #expect(
            lines(text) == [
                "v=0", "o=- 123 1 IN IP4 127.0.0.1", "s=-", "t=0 0",
                "a=group:BUNDLE 0", "a=msid-semantic: WMS *",
                "m=audio 9 UDP/TLS/RTP/SAVPF 111", "c=IN IP4 0.0.0.0",
                "a=mid:0", "a=sendrecv", "a=ice-ufrag:abcd", "a=ice-pwd:0123456789abcdefghijkl",
                "a=ice-options:trickle", "a=fingerprint:sha-256 AB:CD", "a=setup:actpass", "a=rtcp-mux",
                "a=extmap:1 urn:ietf:params:rtp-hdrext:sdes:mid",
                "a=rtpmap:111 opus/48000/2", "a=rtcp-fb:111 transport-cc", "a=fmtp:111 minptime=10",
                "a=ssrc:42 cname:understudy",
                "a=candidate:1 1 udp 2130706431 127.0.0.1 5000 typ host", "a=end-of-candidates",
            ])
        #expect(text.hasSuffix("\r\n") && !text.contains("\n\n"))
        #expect(try SessionDescription.parse(text) == sdp)
    }

    @Test("setters keep the positions of the lines they replace")
    func settersKeepOrder() throws {
        var sdp = try SessionDescription.parse(SDPTestVectors.chromium156OfferSendrecv)
        let before = sdp.media[1].attributes.filter { !$0.isCodecAttribute }
        let kept = sdp.media[1].codecs.filter { $0.payloadType == 96 || $0.payloadType == 97 }
        sdp.media[1].codecs = kept
        #expect(sdp.media[1].formats == ["96", "97"])
        #expect(sdp.media[1].codecs == kept)
        #expect(sdp.media[1].attributes.filter { !$0.isCodecAttribute } == before)
        let text = sdp.serialize()
        #expect(!text.contains("H264") && text.contains("a=rtpmap:97 rtx/90000\r\na=fmtp:97 apt=96\r\n"))
        // rtcp-xr stays before the codecs and ssrc-group after them, as Chromium wrote them.
        #expect(text.contains("a=rtcp-xr:rcvr-rtt=all\r\na=rtpmap:96 VP8/90000\r\n"))
        #expect(text.contains("a=fmtp:97 apt=96\r\na=ssrc-group:FID 1344066152 650572485\r\n"))

        var answer = try SessionDescription.parse(SDPTestVectors.aiortc116AnswerToChromiumOffer)
        let extra = try ICECandidate.parse(
            "candidate:2 1 udp 1694498815 192.0.2.1 40000 typ srflx raddr 0.0.0.0 rport 0")
        answer.media[0].candidates.append(extra)
        #expect(
            answer.serialize().contains(
                "a=candidate:" + extra.attributeValue + "\r\na=end-of-candidates\r\n"))
        answer.media[0].direction = .inactive
        answer.media[0].mid = nil
        #expect(answer.media[0].mid == nil && answer.media[0].direction == .inactive)
        #expect(lines(answer.serialize()).contains("a=inactive"))
        #expect(try SessionDescription.parse(answer.serialize()) == answer)
    }
}

@Suite("ICE candidate")
struct ICECandidateTests {
    @Test func parsesWithAndWithoutPrefix() throws {
        let text =
            "842163049 1 udp 1677729535 203.0.113.7 49203 typ srflx raddr 10.0.0.2 rport 49203 generation 0 ufrag Xy12 network-cost 999"
        let plain = try ICECandidate.parse(text)
        let prefixed = try ICECandidate.parse("candidate:" + text)
        #expect(plain == prefixed)
        #expect(plain.type == "srflx" && plain.relatedAddress == "10.0.0.2" && plain.relatedPort == 49203)
        #expect(plain.value(forExtension: "ufrag") == "Xy12")
        #expect(plain.extensions.count == 3)
        #expect(plain.attributeValue == text)
        #expect(Set([plain, prefixed]).count == 1)
    }

    @Test(
        "rejects malformed candidates",
        arguments: [
            "",
            "candidate:",
            "1 1 udp 2130706431 127.0.0.1 5000 typ",  // no type
            "1 1 udp 2130706431 127.0.0.1 99999999999 typ host",  // port overflow
            "1 1 udp 2130706431 127.0.0.1 65536 typ host",
            "1 1 udp 4294967296 127.0.0.1 5000 typ host",  // priority overflow
            "1 0 udp 2130706431 127.0.0.1 5000 typ host",  // component 0
            "1 -1 udp 2130706431 127.0.0.1 5000 typ host",
            "1 1 udp 2130706431 127.0.0.1 5000 type host",  // not "typ"
            "f:o 1 udp 2130706431 127.0.0.1 5000 typ host",  // foundation not ice-chars
            "1 1 udp 2130706431 127.0.0.1 5000 typ host generation",  // dangling key
            "1 1 udp 2130706431 127.0.0.1 5000 typ srflx raddr 1.2.3.4 rport x",
            "1 1 udp 2130706431 127.0.0.1 5000 typ srflx raddr 1.2.3.4 raddr 5.6.7.8",
        ])
    func rejectsMalformed(text: String) {
        #expect(throws: SDPError.self) { try ICECandidate.parse(text) }
    }
}

@Suite("SDP malformed input")
struct SDPMalformedTests {
    private static let minimal = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"

    private func error(_ text: String) -> SDPError? {
        do {
            _ = try SessionDescription.parse(text)
            return nil
        } catch {
            return error
        }
    }

    @Test func structuralErrors() {
        #expect(error("") == .missingVersion)
        #expect(error("o=- 1 1 IN IP4 127.0.0.1\r\n") == .missingVersion)
        #expect(error("v=1\r\n") == .unsupportedVersion(line: 1))
        #expect(error("v=0\r\ns=-\r\n") == .missingOrigin)
        #expect(error("v=0\r\nm=audio 9 RTP/AVP 0\r\n") == .missingOrigin)
        #expect(error("v=0\r\no=- 1 x IN IP4 1.2.3.4\r\n") == .invalidOrigin(line: 2))
        #expect(error("v=0\r\no=- 1 1 IN IP4\r\n") == .invalidOrigin(line: 2))
        #expect(error(Self.minimal + "a") == .malformedLine(line: 5, text: "a"))
        #expect(error(Self.minimal + "=x\r\n") == .malformedLine(line: 5, text: "=x"))
        #expect(error(Self.minimal + "a=x\0y\r\n") == .malformedLine(line: 5, text: "a=x\0y"))
        #expect(error(Self.minimal + "a=x\ry\r\n") == .malformedLine(line: 5, text: "a=x\ry"))
        #expect(error(Self.minimal + "v=0\r\n") == .malformedLine(line: 5, text: "v=0"))
        #expect(error("v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\nt=x 0\r\n") == .invalidTiming(line: 3))
        #expect(error("v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\nr=1 2\r\n") == .invalidTiming(line: 3))
        #expect(error(Self.minimal + "c=IN IP4\r\n") == .invalidConnection(line: 5))
        #expect(error(Self.minimal + "b=AS\r\n") == .invalidBandwidth(line: 5))
        #expect(error(Self.minimal + "b=AS:99999999999999999999999\r\n") == .invalidBandwidth(line: 5))
        // A truncated final line without its line end is still a line.
        #expect(error(Self.minimal + "m=audio 9") == .invalidMediaLine(line: 5))
    }

    @Test(
        "bad m= lines",
        arguments: [
            "m=audio",
            "m=audio 9",
            "m=audio 99999999999 UDP/TLS/RTP/SAVPF 111",
            "m=audio 65536 UDP/TLS/RTP/SAVPF 111",
            "m=audio -1 UDP/TLS/RTP/SAVPF 111",
            "m=audio 9/ UDP/TLS/RTP/SAVPF 111",
            "m=audio 9/x UDP/TLS/RTP/SAVPF 111",
        ])
    func badMediaLine(line: String) {
        #expect(error(Self.minimal + line + "\r\n") == .invalidMediaLine(line: 5))
    }

    @Test(
        "bad typed attributes name the line and attribute",
        arguments: [
            ("candidate", "1 1 udp 2130706431 127.0.0.1 99999999999 typ host"),
            ("candidate", "garbage"),
            ("rtpmap", "300 opus/48000/2"),
            ("rtpmap", "111 opus"),
            ("rtpmap", "111 opus/48000/99999999"),
            ("fmtp", "abc x=1"),
            ("rtcp-fb", "111"),
            ("extmap", "99999999 urn:x"),
            ("extmap", "1/sideways urn:x"),
            ("ssrc", "4294967296 cname:x"),
            ("ssrc", "1"),
            ("ssrc-group", "FID 1 x"),
            ("setup", "sometimes"),
            ("fingerprint", "sha-256"),
            ("rid", "q sideways"),
            ("simulcast", "send"),
            ("simulcast", "send q;;h"),
            ("simulcast", "send q send h"),
            ("simulcast", "send ~"),
            ("sctp-port", "70000"),
            ("mid", ""),
            ("group", ""),
            ("msid", "a b c"),
        ])
    func badAttribute(name: String, value: String) {
        let text = Self.minimal + "m=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=\(name):\(value)\r\n"
        #expect(error(text) == .invalidAttribute(line: 6, name: name))
    }

    @Test("a bundle-only section with port 0 is live, a plain port 0 is rejected (RFC 8843 §6)")
    func bundleOnlyIsNotRejected() throws {
        // GStreamer webrtcbin's max-bundle offer: the second section has port 0 and a=bundle-only.
        let text = """
            v=0\r\no=- 5 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE video0 audio1\r\n\
            m=video 9 UDP/TLS/RTP/SAVPF 96\r\nc=IN IP4 0.0.0.0\r\na=mid:video0\r\na=rtpmap:96 VP8/90000\r\n\
            m=audio 0 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\na=bundle-only\r\na=mid:audio1\r\n\
            a=rtpmap:111 OPUS/48000/2\r\n\
            m=audio 0 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\na=mid:audio2\r\na=rtpmap:111 OPUS/48000/2\r\n
            """
        let sdp = try SessionDescription.parse(text)
        #expect(sdp.media.map(\.bundleOnly) == [false, true, false])
        #expect(sdp.media.map(\.isRejected) == [false, false, true])
    }

    @Test("data channel section and simulcast alternatives")
    func dataChannelAndSimulcast() throws {
        let text = """
            v=0\r\no=- 5 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0 1\r\n\
            m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP4 0.0.0.0\r\na=mid:0\r\n\
            a=sctp-port:5000\r\na=max-message-size:262144\r\n\
            m=video 0 UDP/TLS/RTP/SAVPF 96\r\nc=IN IP4 0.0.0.0\r\na=mid:1\r\na=rtpmap:96 VP8/90000\r\n\
            a=extmap:3/recvonly urn:example:ext some attributes\r\n\
            a=rid:1 recv pt=96;max-width=1280\r\na=rid:2 recv\r\na=rid:3 recv\r\na=rid:4 recv\r\n\
            a=simulcast:recv 1,~4;2;~3\r\n
            """
        let sdp = try SessionDescription.parse(text)
        let data = sdp.media[0]
        #expect(data.type == .application && data.kind == nil)
        #expect(data.formats == ["webrtc-datachannel"] && data.codecs.isEmpty)
        #expect(data.sctpPort == 5000 && data.maxMessageSize == 262144)
        let video = sdp.media[1]
        #expect(video.isRejected && video.effectiveDirection == .sendrecv)
        #expect(
            video.extmaps == [
                SDPExtmap(
                    id: 3, direction: .recvonly, uri: "urn:example:ext",
                    attributes: "some attributes")
            ])
        #expect(
            video.rids[0].parameters == [
                SDPParameter(key: "pt", value: "96"),
                SDPParameter(key: "max-width", value: "1280"),
            ])
        let simulcast = try #require(video.simulcast)
        #expect(simulcast.send.isEmpty)
        #expect(
            simulcast.receive == [
                [SDPSimulcastRID(id: "1"), SDPSimulcastRID(id: "4", paused: true)],
                [SDPSimulcastRID(id: "2")], [SDPSimulcastRID(id: "3", paused: true)],
            ])
        #expect(simulcast.receiveRIDs == ["1", "2", "3"])
        #expect(sdp.serialize() == text)
    }

    @Test func oversizedInput() {
        let big = Self.minimal + String(repeating: "a=x-padding:0123456789abcdef\r\n", count: 10_000)
        #expect(error(big) == .inputTooLarge(size: big.utf8.count, limit: SessionDescription.maximumInputSize))
    }

    @Test("lenient where real peers are: LF, blank lines, missing s=/t=, unknown lines kept")
    func lenient() throws {
        let text =
            "v=0\no=- 1 1 IN IP4 127.0.0.1\n\ni=info\nz=0 0\nx=unknown\na=custom\nm=video 9 RTP/AVP 96\nk=prompt\ni=media info\nb=AS:500\na=custom:with: colons \n"
        let sdp = try SessionDescription.parse(text)
        #expect(sdp.sessionName == "-")
        #expect(sdp.timing == [SDPTiming()])
        #expect(sdp.informationLines.map(\.value) == ["info"])
        #expect(sdp.otherLines.map(\.value) == ["0 0", "unknown"])
        #expect(sdp.attributes == [.other(name: "custom", value: nil)])
        #expect(sdp.media[0].informationLines.map(\.value) == ["media info"])
        #expect(sdp.media[0].otherLines.map(\.value) == ["prompt"])
        #expect(sdp.media[0].bandwidths == [SDPBandwidth(type: "AS", value: 500)])
        #expect(sdp.media[0].otherAttributes.first?.value == "with: colons")
        #expect(sdp.media[0].codecs.isEmpty)  // 96 has no rtpmap and is not static
        #expect(try SessionDescription.parse(sdp.serialize()) == sdp)
    }
}

/// Deterministic generator so failures reproduce.
private struct SplitMix64 {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
}

@Suite("SDP robustness")
struct SDPRobustnessTests {
    private func fuzz(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { SDPFuzz.run($0) }
    }

    @Test("every prefix of every vector is handled without trapping and round-trips when it parses")
    func truncations() throws {
        var parsedCount = 0
        for vector in SDPTestVectors.all {
            let bytes = Array(crlf(vector.text).utf8)
            // Every line boundary, plus cuts inside lines.
            let lineEnds = bytes.indices.filter { bytes[$0] == 0x0A }.map { $0 + 1 }
            let sampledLineEnds = stride(from: 0, to: lineEnds.count, by: 5).map { lineEnds[$0] }
            for end in Set(sampledLineEnds + Array(stride(from: 0, through: bytes.count, by: 257))).sorted() {
                fuzz(Array(bytes[0..<end]))
                if (try? SessionDescription.parse(String(decoding: bytes[0..<end], as: UTF8.self))) != nil {
                    parsedCount += 1
                }
            }
        }
        #expect(parsedCount > 200)  // every prefix past the o= line parses
    }

    @Test("random mutations of the vectors keep the round-trip invariant")
    func mutations() {
        var random = SplitMix64(state: 0x5D9_2026)
        let alphabet = Array(" :/;,~=*\t\r\n0123456789-ab".utf8) + [0x00, 0xFF, 0xC3, 0xA9, 0xCC, 0x81]
        var survivors = 0
        for round in 0..<300 {
            var bytes = Array(SDPTestVectors.all[round % SDPTestVectors.all.count].text.utf8)
            for _ in 0..<(1 + random.below(4)) {
                let position = random.below(bytes.count)
                switch random.below(3) {
                case 0: bytes[position] = alphabet[random.below(alphabet.count)]
                case 1: bytes.insert(alphabet[random.below(alphabet.count)], at: position)
                default: bytes.remove(at: position)
                }
            }
            fuzz(bytes)
            if (try? SessionDescription.parse(String(decoding: bytes, as: UTF8.self))) != nil { survivors += 1 }
        }
        #expect(survivors > 30)
    }

    @Test("binary garbage and absurd numbers never trap")
    func garbage() {
        var random = SplitMix64(state: 42)
        for length in [0, 1, 2, 3, 16, 300, 5000] {
            for _ in 0..<50 {
                fuzz((0..<length).map { _ in UInt8(truncatingIfNeeded: random.next()) })
            }
        }
        let absurd = "v=0\r\no=- 99999999999999999999999999 18446744073709551616 IN IP4 x\r\n"
        #expect(throws: SDPError.invalidOrigin(line: 2)) { try SessionDescription.parse(absurd) }
        let digits = String(repeating: "9", count: 10_000)
        let long = "v=0\r\no=- 1 1 IN IP4 x\r\nm=audio \(digits) RTP/AVP 0\r\n"
        #expect(throws: SDPError.invalidMediaLine(line: 3)) { try SessionDescription.parse(long) }
        fuzz(Array(long.utf8))
    }
}

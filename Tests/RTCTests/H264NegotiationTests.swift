import Foundation
import RTCWire
import TestSupport
import Testing

@testable import RTC

/// H.264 offer/answer against Chromium 156's real offer (`Fuzz/seeds/sdp/chromium-156-offer-sendrecv.sdp`).
@Suite struct H264NegotiationTests {
    static func chromiumOffer(_ edit: (String) -> String = { $0 }) throws -> SessionDescription {
        // The repository keeps the captured offer among the sdp fuzz seeds.
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let text = try String(
            contentsOf: root.appendingPathComponent("Fuzz/seeds/sdp/chromium-156-offer-sendrecv.sdp"), encoding: .utf8)
        return try SessionDescription.parse(edit(text))
    }

    static func answer(_ offer: SessionDescription) async throws -> (String, MediaCodec?, [SDPParameter]?) {
        let pc = try PeerConnection(loop: EventLoop(name: "h264-answer"))
        defer { Task { await shutdown(pc) } }
        return try await pc.loop.submit { () throws -> (String, MediaCodec?, [SDPParameter]?) in
            try pc.setRemoteDescription(offer, type: .offer)
            let answer = try pc.createAnswer()
            let video = pc.transceivers.first { $0.kind == .video && !$0.writesRejected }
            return (answer.serialize(), video?.codec, video?.codecParameters)
        }
    }

    /// The offer with its VP8, VP9 and AV1 formats renamed to codecs nobody implements.
    static func withoutOtherCodecs(_ sdp: String) -> String {
        sdp.replacingOccurrences(of: "VP8/90000", with: "XVP8/90000")
            .replacingOccurrences(of: "VP9/90000", with: "XVP9/90000")
            .replacingOccurrences(of: "AV1/90000", with: "XAV1/90000")
    }

    static func videoSection(_ sdp: String) -> [Substring] {
        let lines = sdp.split(separator: "\r\n")
        guard let start = lines.firstIndex(where: { $0.hasPrefix("m=video") }) else { return [] }
        return Array(lines[start...].prefix { !$0.hasPrefix("m=") || $0.hasPrefix("m=video") })
    }

    @Test func vp8StaysPreferredWhenBothAreOffered() async throws {
        let (sdp, codec, _) = try await Self.answer(try Self.chromiumOffer())
        #expect(codec == .vp8)
        let video = Self.videoSection(sdp)
        #expect(video.contains("a=rtpmap:96 VP8/90000"))
        #expect(!video.contains { $0.contains("H264") })
    }

    @Test func anH264OnlyOfferIsAnsweredWithItsFirstModeOneProfile() async throws {
        // What a page's setCodecPreferences([H264...]) leaves: no VP8, VP9 or AV1 in the offer.
        let offer = try Self.chromiumOffer { Self.withoutOtherCodecs($0) }
        let (sdp, codec, parameters) = try await Self.answer(offer)
        #expect(codec == .h264)
        let video = Self.videoSection(sdp)
        #expect(video.first?.hasPrefix("m=video") == true && video.first?.hasSuffix(" 102 103") == true)
        #expect(video.contains("a=rtpmap:102 H264/90000"))
        #expect(video.contains("a=fmtp:102 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42001f"))
        #expect(video.contains("a=fmtp:103 apt=102"))
        #expect(parameters.flatMap { H264FormatParameters($0) }?.profileLevelID.profile == .baseline)
    }

    @Test func noUsableFormatRejectsTheMLine() async throws {
        // Only interleaved mode (2) and no VP8, VP9 or AV1: nothing this stack takes.
        let offer = try Self.chromiumOffer {
            Self.withoutOtherCodecs($0)
                .replacingOccurrences(of: "packetization-mode=1", with: "packetization-mode=2")
                .replacingOccurrences(of: "packetization-mode=0", with: "packetization-mode=2")
        }
        let (sdp, codec, _) = try await Self.answer(offer)
        #expect(codec == nil)
        #expect(Self.videoSection(sdp).first?.hasPrefix("m=video 0 ") == true)
    }

    @Test func anOfferListsEveryPreferredCodecWithItsParameters() async throws {
        let pc = try PeerConnection(loop: EventLoop(name: "h264-offer"))
        defer { Task { await shutdown(pc) } }
        let sdp = try await pc.loop.submit { () throws -> String in
            let t = pc.addTransceiver(kind: .video, direction: .sendonly)
            t.setCodecPreferences(
                [.h264],
                parameters: [
                    .h264: [
                        SDPParameter(key: "packetization-mode", value: "1"),
                        SDPParameter(key: "profile-level-id", value: "4d001f"),
                    ]
                ])
            return try pc.createOffer().serialize()
        }
        let video = Self.videoSection(sdp)
        #expect(video.first?.hasSuffix(" 102 103") == true)
        #expect(video.contains("a=rtpmap:102 H264/90000"))
        #expect(video.contains("a=fmtp:102 packetization-mode=1;profile-level-id=4d001f"))
        #expect(!video.contains { $0.contains("VP8") })
        // A receive-only m-line offers every codec it takes, VP8 first.
        let pc2 = try PeerConnection(loop: EventLoop(name: "h264-offer-recv"))
        defer { Task { await shutdown(pc2) } }
        let both = try await pc2.loop.submit { () throws -> String in
            pc2.addTransceiver(kind: .video, direction: .recvonly)
            return try pc2.createOffer().serialize()
        }
        let section = Self.videoSection(both)
        #expect(section.first?.hasSuffix(" 96 97 98 99 102 103 45 46") == true)
        #expect(section.contains("a=rtpmap:98 VP9/90000") && section.contains("a=rtpmap:45 AV1/90000"))
        #expect(section.contains("a=fmtp:102 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f"))
    }
}

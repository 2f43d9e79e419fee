import Foundation
import RTCWire
import Testing

@testable import RTC

/// A peer that invents SSRCs must not make a connection create receive state for each of them.
@Suite("Remote SSRC limit")
struct SSRCLimitTests {
    @Test func receiveStateStopsAtTheConfiguredNumberOfSSRCs() async throws {
        var configuration = PeerConnectionConfiguration()
        configuration.maxRemoteSSRCs = 4
        let tx = try PeerConnection(loop: EventLoop(name: "ssrc-tx"))
        let rx = try PeerConnection(loop: EventLoop(name: "ssrc-rx"), configuration: configuration)
        defer {
            tx.loop.shutdown()
            rx.loop.shutdown()
        }
        _ = await tx.loop.submit { tx.addTransceiver(kind: .video, direction: .sendonly) }
        let offer = try await tx.loop.submit {
            let o = try tx.createOffer()
            try tx.setLocalDescription(o)
            return o
        }
        let (routed, streams) = try await rx.loop.submit { () throws -> (Int, Int) in
            try rx.setRemoteDescription(offer, type: .offer)
            let a = try rx.createAnswer()
            try rx.setLocalDescription(a)
            let payloadType = rx.transceivers.first { $0.kind == .video }?.payloadType ?? 96
            var routed = 0
            for ssrc in UInt32(1000)..<UInt32(1100) {
                var packet: [UInt8] = [0x80, payloadType, 0, 1, 0, 0, 0, 1]
                packet += [UInt8(ssrc >> 24), UInt8(ssrc >> 16 & 0xFF), UInt8(ssrc >> 8 & 0xFF), UInt8(ssrc & 0xFF)]
                packet += [0x90, 0x80, 0x00, 0x00]
                let found = try packet.withUnsafeBytes { raw -> Bool in
                    let header = try RTPHeader.parse(raw)
                    return rx.transport.listener.bind(raw, header: header, routes: rx.transceivers) != nil
                }
                if found { routed += 1 }
            }
            return (routed, rx.transport.listener.bySSRC.count)
        }
        #expect(routed == 4)
        #expect(streams == 4)
    }
}

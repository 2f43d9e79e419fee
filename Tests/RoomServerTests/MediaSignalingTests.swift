import Foundation
import RTC
import RTCWire
import RoomServer
import Signaling
import TestSupport
import Testing

/// Issue 10 items 6 and 8 on the media side, against the real in-process SFU.
@Suite("RoomServer media hardening", .serialized)
struct MediaSignalingTests {
    /// A publish restart (`restartIce` with an SDP) that adds an m-line would create a producer
    /// the room never hears of: it is refused with 3073 and nothing new is forwarded.
    @Test func anICERestartOfferThatAddsAnMLineIsRefused() async throws {
        let server = try startTestServer()
        defer { server.stop() }
        let host = try await RoomMediaPeer.join(server, room: "restart", participant: "host")
        defer { Task { await host.close() } }
        try await host.publish()
        let pc = host.publishConnection
        let offer = try await pc.loop.submit {
            _ = pc.addTransceiver(kind: .video, direction: .sendonly)
            let o = try pc.createOffer(iceRestart: true)
            try pc.setLocalDescription(o)
            return o.serialize()
        }
        let error = try await host.signaling.expectError(
            "restartIce", ["connection": "publish", "sdp": .string(offer)])
        #expect(error.code == 3073)
        let stats = try await host.signaling.request("getStats").get()
        #expect(stats["producers"]?.arrayValue?.count == 2)
    }

    /// With a port range, a publish offer that fails to negotiate gives its port back at once:
    /// two failures on a two-port range leave room for a good publisher.
    @Test func aFailedNegotiationFreesItsPort() async throws {
        let low = UInt16.random(in: 43000...47000)
        let server = try startServer {
            $0.udpPortLow = low
            $0.udpPortHigh = low + 1
        }
        defer { server.stop() }
        for name in ["bad1", "bad2"] {
            let (client, _) = try await TestClient.joined(server, room: "ports", participant: name)
            let pc = try PeerConnection(loop: EventLoop(name: "\(name)-pub"))
            let offer = try await pc.loop.submit {
                _ = pc.addTransceiver(kind: .video, direction: .sendonly)
                return try pc.createOffer().serialize()
            }
            pc.loop.shutdown()
            // No DTLS fingerprint: the SFU cannot negotiate this offer.
            let broken =
                offer.split(separator: "\r\n").filter { !$0.hasPrefix("a=fingerprint") }
                .joined(separator: "\r\n") + "\r\n"
            let error = try await client.expectError(
                "produce", ["kind": "webcam", "sdp": .string(broken)])
            #expect(error.code == 5000)
        }
        let good = try await RoomMediaPeer.join(server, room: "ports", participant: "good")
        defer { Task { await good.close() } }
        let result = try await good.publishRequest()
        if case .failure(let e) = result { Issue.record("publish after failures: \(e)") }
    }

    /// The default is one shared UDP port: several participants publish and receive through it.
    @Test func everyConnectionSharesOnePortByDefault() async throws {
        #expect(RoomServerConfiguration().udpPortLow == RoomServerConfiguration().udpPortHigh)
        let port = UInt16.random(in: 43000...47000)
        let server = try startServer {
            $0.udpPortLow = port
            $0.udpPortHigh = port
        }
        defer { server.stop() }
        let a = try await RoomMediaPeer.join(server, room: "shared", participant: "a")
        let b = try await RoomMediaPeer.join(server, room: "shared", participant: "b")
        defer {
            Task {
                await a.close()
                await b.close()
            }
        }
        let response = try await a.publishRequest().get()
        let sdp = response["sdp"]?.stringValue ?? ""
        #expect(sdp.contains(" \(port) typ host"))
        let answer = try SessionDescription.parse(sdp)
        try await a.publishConnection.loop.submit {
            try a.publishConnection.setRemoteDescription(answer, type: .answer)
        }
        try await a.publishConnection.waitUntilConnected(timeout: 10)
        try await b.waitForAnswers(1, seconds: 15)
        try await b.subscribeConnection.waitUntilConnected(timeout: 10)
    }
}

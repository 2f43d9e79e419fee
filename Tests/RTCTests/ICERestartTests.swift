import Foundation
import Media
import RTCWire
import TestSupport
import Testing

@testable import RTC

/// ICE restart between two PeerConnections over loopback UDP: fresh credentials, the same DTLS/SRTP
/// session and RTP streams, and media that keeps arriving; and media loss noticed through consent.
@Suite("ICE restart", .serialized)
struct ICERestartTests {
    /// Counts frames delivered by the receiving connection (written on its loop thread).
    final class FrameCounter: @unchecked Sendable {
        private let lock = NSLock()
        private var frames = 0
        var count: Int { lock.withLock { frames } }
        func add() { lock.withLock { frames += 1 } }
    }

    /// A sender and a receiver, connected; `configuration` applies to both.
    static func connectedPair(_ configuration: PeerConnectionConfiguration = .init()) async throws -> (
        tx: PeerConnection, rx: PeerConnection, video: RTPTransceiver, frames: FrameCounter
    ) {
        let (tx, rx, video, _) = try await TestSupport.connectedPair(
            sendAudio: false, configuration: configuration, name: "restart")
        let frames = FrameCounter()
        await rx.loop.submit { rx.onFrame = { _, _, _, _ in frames.add() } }
        return (tx, rx, video!, frames)
    }

    /// Sends `count` frames (a keyframe first), one per call to the loop.
    static func send(_ count: Int, on tx: PeerConnection, _ video: RTPTransceiver, from start: Int) async {
        for i in 0..<count {
            let frame = SyntheticVP8Frame.make(size: 1200, keyframe: i == 0)
            let stamped = EncodedFrame(
                codec: .vp8, data: frame.data, timestamp: UInt32(truncatingIfNeeded: (start + i) * 3000),
                isKeyframe: frame.isKeyframe)
            await tx.loop.submit { tx.send(stamped, on: video) }
            try? await Task.sleep(nanoseconds: 5_000_000)
        }
    }

    /// Polls until `condition` (evaluated on nothing in particular) holds; false on timeout.
    static func eventually(seconds: Double = 15, _ condition: () async -> Bool) async -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if await condition() { return true }
            try? await Task.sleep(nanoseconds: 20_000_000)
        }
        return await condition()
    }

    @Test func restartOfferChangesCredentialsAndKeepsTheMediaSession() async throws {
        let (tx, rx, video, frames) = try await Self.connectedPair()
        await Self.send(20, on: tx, video, from: 0)
        #expect(await Self.eventually { frames.count >= 10 })
        // The receiver has authentic SRTP from its peer: its DTLS state is given back, and the
        // restart below must work without it.
        #expect(await rx.loop.submit { rx.transport.dtls?.isHandshakeStateReleased == true })

        let before = await tx.loop.submit { (tx.localICECredentials, tx.srtpProfile, tx.senderStats()[0].stats) }
        let rxBefore = await rx.loop.submit { rx.localICECredentials }
        let offer = try await tx.loop.submit {
            let o = try tx.createOffer(iceRestart: true)
            try tx.setLocalDescription(o)
            return o
        }
        let restarting = await tx.loop.submit { tx.isRestartingICE }
        #expect(restarting)
        let offeredUfrag = offer.media.first?.iceUfrag ?? offer.iceUfrag
        #expect(offeredUfrag != nil && offeredUfrag != before.0.ufrag)
        let answer = try await rx.loop.submit {
            try rx.setRemoteDescription(offer, type: .offer)
            let a = try rx.createAnswer()
            try rx.setLocalDescription(a)
            return a
        }
        let rxAfter = await rx.loop.submit { rx.localICECredentials }
        #expect(rxAfter.ufrag != rxBefore.ufrag)
        #expect(rxAfter.password != rxBefore.password)
        #expect((answer.media.first?.iceUfrag ?? answer.iceUfrag) == rxAfter.ufrag)
        try await tx.loop.submit { try tx.setRemoteDescription(answer, type: .answer) }

        #expect(await Self.eventually { await tx.loop.submit { tx.isFullyConnected } })
        #expect(await Self.eventually { await rx.loop.submit { rx.isFullyConnected } })
        let after = await tx.loop.submit { (tx.localICECredentials, tx.srtpProfile) }
        #expect(after.0.ufrag != before.0.ufrag)
        #expect(after.1 == before.1)

        // The same RTP sender continues (no new SSRC) and its frames still arrive.
        let received = frames.count
        await Self.send(20, on: tx, video, from: 20)
        #expect(await Self.eventually { frames.count >= received + 10 })
        let stats = await tx.loop.submit { tx.senderStats() }
        #expect(stats.count == 1)
        #expect(stats[0].stats.packetsSent > before.2.packetsSent)
        let receivers = await rx.loop.submit { rx.receiverStats() }
        #expect(receivers.count == 1)
        let srtpFailures = await rx.loop.submit { rx.counters.droppedSRTP }
        #expect(srtpFailures == 0)
        await shutdown(tx, rx)
    }

    @Test func lostMediaIsNoticedAndARestartWithoutSDPRecoversIt() async throws {
        var configuration = PeerConnectionConfiguration()
        configuration.iceTimeouts.consentInterval = 200_000_000
        configuration.iceTimeouts.disconnectedAfter = 700_000_000
        let (tx, rx, video, frames) = try await Self.connectedPair(configuration)
        await Self.send(10, on: tx, video, from: 0)
        #expect(await Self.eventually { frames.count >= 5 })

        // The path dies in both directions: both notice (their consent checks go unanswered).
        await tx.loop.submit { tx.setImpairment(Impairment(receiveDropRate: 1)) }
        await rx.loop.submit { rx.setImpairment(Impairment(receiveDropRate: 1)) }
        #expect(await Self.eventually { await tx.loop.submit { tx.state == .disconnected } })
        #expect(await Self.eventually { await rx.loop.submit { rx.state == .disconnected } })

        // Restart while the path is still down (credentials exchanged out of band, as `restartIce`
        // does), then the path returns: the new checks select a pair and both are connected again.
        let txFresh = try await tx.loop.submit { try tx.restartICE() }
        let rxFresh = try await rx.loop.submit { try rx.restartICE() }
        try await tx.loop.submit { try tx.setRemoteICECredentials(ufrag: rxFresh.ufrag, password: rxFresh.password) }
        try await rx.loop.submit { try rx.setRemoteICECredentials(ufrag: txFresh.ufrag, password: txFresh.password) }
        try await Task.sleep(nanoseconds: 300_000_000)
        let stillDown = await tx.loop.submit { tx.isFullyConnected }
        #expect(!stillDown)
        await tx.loop.submit { tx.setImpairment(nil) }
        await rx.loop.submit { rx.setImpairment(nil) }
        // Woken by the new pair's selection (the SDK's `restartIce` waits the same way).
        try await tx.waitUntilFullyConnected(timeout: 30)
        try await rx.waitUntilFullyConnected(timeout: 30)

        let received = frames.count
        await Self.send(10, on: tx, video, from: 10)
        #expect(await Self.eventually { frames.count >= received + 5 })
        let dropped = await rx.loop.submit { rx.counters.droppedSRTP }
        #expect(dropped == 0)
        await shutdown(tx, rx)
    }

    @Test func consentReturningWithoutARestartReportsRecovery() async throws {
        var configuration = PeerConnectionConfiguration()
        configuration.iceTimeouts.consentInterval = 200_000_000
        configuration.iceTimeouts.disconnectedAfter = 700_000_000
        let (tx, rx, _, _) = try await Self.connectedPair(configuration)
        await tx.loop.submit { tx.setImpairment(Impairment(receiveDropRate: 1)) }
        #expect(await Self.eventually { await tx.loop.submit { tx.state == .disconnected } })
        await tx.loop.submit { tx.setImpairment(nil) }
        #expect(await Self.eventually { await tx.loop.submit { tx.state == .connected } })
        await shutdown(tx, rx)
    }
}

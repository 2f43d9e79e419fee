import Foundation
import Media
import RTCWire
import TestSupport
import Testing

@testable import RTC

/// Swift ↔ Swift PeerConnections over real loopback UDP: media flows and is recorded, and hostile
/// datagrams are dropped and counted without disturbing the session.
@Suite(.serialized) struct PeerConnectionLoopbackTests {
    @Test func mediaFlowsAndRecordingPlaysInFFmpeg() async throws {
        let (tx, rx, video, audio) = try await connectedPair()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pc-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("loop.webm").path
        let recording = try Recording(path: path)
        await rx.loop.submit {
            rx.onFrame = { _, _, frame, timing in recording.write(frame, arrival: timing.arrivalTime) }
        }
        let pump = MediaPump(
            connection: tx, video: video, audio: audio, sources: SyntheticMedia.shared(layers: 1).source)
        await tx.loop.submit { pump.attach() }
        try await Task.sleep(nanoseconds: 4_500_000_000)
        await tx.loop.submit { pump.detach() }
        try await Task.sleep(nanoseconds: 200_000_000)
        await rx.loop.submit { rx.onFrame = nil }
        try recording.close()
        let profile = await rx.loop.submit { rx.srtpProfile }
        #expect(profile == .aeadAES128GCM, "GCM is offered first and both sides support it")
        #expect(recording.videoFrames >= 80)
        #expect(recording.audioFrames >= 130)
        let probe = try runToolText(
            "/usr/bin/ffprobe",
            [
                "-v", "error", "-count_frames", "-show_entries",
                "stream=codec_name,nb_read_frames", "-of", "csv=p=0", path,
            ])
        #expect(probe.contains("vp8"))
        #expect(probe.contains("opus"))
        let decode = try runToolText(
            "/usr/bin/ffmpeg", ["-v", "error", "-i", path, "-enc_time_base", "-1", "-f", "null", "-"])
        #expect(decode.isEmpty, "ffmpeg reported decode errors: \(decode)")
        // The synthetic source flashes and beeps together every 2 s: after RTP, SRTP and the
        // recorder's timestamping they must still line up in the file.
        let sync = try SyncMarkerAnalyzer.analyze(path: path)
        #expect(sync.pairs >= 1, "flash/beep pairs found: \(sync)")
        if let offset = sync.offsetMilliseconds { #expect(abs(offset) <= 40, "A/V offset \(offset) ms") }
        await shutdown(tx, rx)
    }

    /// RFC 3550 §6.6: a closing connection sends an RTCP BYE for each of its sending SSRCs (RTX
    /// included) before DTLS closes, after media (behind an SR) and before any (behind an RR).
    @Test(arguments: [true, false]) func closingSendsABYEForEverySendingSSRC(sendMediaFirst: Bool) async throws {
        let (tx, rx, video, audio) = try await connectedPair(name: "bye-\(sendMediaFirst)")
        final class Seen: @unchecked Sendable {
            let lock = NSLock()
            var byes: Set<UInt32> = []
            var frames = 0
        }
        let seen = Seen()
        await rx.loop.submit {
            rx.onBYE = { ssrc in seen.lock.withLock { _ = seen.byes.insert(ssrc) } }
            rx.onFrame = { _, _, _, _ in seen.lock.withLock { seen.frames += 1 } }
        }
        if sendMediaFirst {
            let pump = MediaPump(
                connection: tx, video: video, audio: audio, sources: SyntheticMedia.shared(layers: 1).source)
            await tx.loop.submit { pump.attach() }
            try await waitUntil("frames reached the receiver") { seen.lock.withLock { seen.frames >= 10 } }
            await tx.loop.submit { pump.detach() }
        }
        let sending: Set<UInt32> = await tx.loop.submit {
            var all: Set<UInt32> = []
            for t in tx.transceivers {
                for s in t.senders {
                    all.insert(s.ssrc)
                    if let rtx = s.rtx { all.insert(rtx.ssrc) }
                }
            }
            return all
        }
        #expect(sending.count >= 2)
        await tx.loop.submit { tx.close() }
        try await waitUntil("a BYE for every sending SSRC") { seen.lock.withLock { seen.byes == sending } }
        await shutdown(tx, rx)
    }

    @Test func hostileDatagramsAreDroppedAndCounted() async throws {
        let (tx, rx, video, _) = try await connectedPair(sendAudio: false)
        guard let rxAddress = await rx.loop.submit({ rx.localAddress }) else {
            Issue.record("receiver has no socket")
            return
        }
        // An attacker socket on another port of the same host.
        final class Sink: DatagramHandler {
            func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket) {}
        }
        let attackerLoop = EventLoop(name: "attacker")
        let sink = Sink()
        let attacker = try attackerLoop.openUDP(bindTo: SocketAddress(ip: "127.0.0.1", port: 0)!, handler: sink)
        let before = await rx.loop.submit { (rx.counters, rx.iceCounters ?? ICECounters()) }

        await attackerLoop.submit {
            // RTP-looking, DTLS-looking and unclassifiable datagrams from an address that never did ICE.
            attacker.send(
                [0x80, 0x60, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1] + [UInt8](repeating: 7, count: 100), to: rxAddress)
            attacker.send([22, 0xFE, 0xFD] + [UInt8](repeating: 0, count: 40), to: rxAddress)
            attacker.send([0xFF, 1, 2, 3], to: rxAddress)
            attacker.send([], to: rxAddress)
            // A STUN binding request with the right username shape but a wrong MESSAGE-INTEGRITY key.
            var stun = STUNMessage(method: .binding, messageClass: .request, transactionID: .random())
            stun.attributes = [.username("nobody:nobody"), .priority(1)]
            attacker.send(
                stun.serialize(integrityKey: Array("wrong-password-wrong-pw".utf8), fingerprint: true), to: rxAddress)
            // Truncated STUN.
            attacker.send([0x00, 0x01, 0x00, 0x08, 0x21, 0x12], to: rxAddress)
        }
        // From the address that did complete ICE: SRTP that fails authentication.
        await tx.loop.submit {
            guard let socket = tx.transport.sockets.first else { return }
            var bogus: [UInt8] = [0x80, 0x60, 0x12, 0x34, 0, 0, 0, 1, 0xDE, 0xAD, 0xBE, 0xEF]
            bogus += [UInt8](repeating: 0x55, count: 200)
            socket.send(bogus, to: rxAddress)
        }
        try await Task.sleep(nanoseconds: 300_000_000)
        let after = await rx.loop.submit { (rx.counters, rx.iceCounters ?? ICECounters(), rx.state) }
        #expect(after.0.droppedUnknownAddress >= before.0.droppedUnknownAddress + 2)
        #expect(after.0.droppedMalformed > before.0.droppedMalformed)
        #expect(after.0.droppedSRTP >= before.0.droppedSRTP + 1)
        let iceDrops = after.1.droppedBadIntegrity + after.1.droppedUnknownUsername + after.1.droppedMalformed
        let iceDropsBefore = before.1.droppedBadIntegrity + before.1.droppedUnknownUsername + before.1.droppedMalformed
        // The forged-integrity request is refused by ICE; the truncated one is counted as malformed above.
        #expect(iceDrops >= iceDropsBefore + 1)
        #expect(after.2 == .connected, "the session survives hostile input")

        // And media still flows after the attack.
        let pump = MediaPump(connection: tx, video: video, audio: nil, sources: SyntheticMedia.shared(layers: 1).source)
        let received = Counter()
        await rx.loop.submit { rx.onFrame = { _, _, _, _ in received.add() } }
        await tx.loop.submit { pump.attach() }
        try await Task.sleep(nanoseconds: 1_000_000_000)
        await tx.loop.submit { pump.detach() }
        #expect(received.value > 10)
        attackerLoop.shutdown()
        await shutdown(tx, rx)
    }

    /// A lite server's offer lets the peer connect before the server has its answer (an SFU's room
    /// queue can hold the answer back): the ClientHello that comes first is kept, not dropped, and the
    /// handshake goes on from it once the answer is set.
    @Test func aClientHelloBeforeTheAnswerIsKeptForTheHandshake() async throws {
        let (server, client, answer) = try await Self.liteServerWithoutItsAnswer("early-dtls")
        try await server.loop.submit { try server.setRemoteDescription(answer, type: .answer) }
        try await server.waitUntilConnected(timeout: 20)
        try await client.waitUntilConnected(timeout: 20)
        let dropped = await server.loop.submit {
            server.counters.droppedUnknownAddress + server.counters.dtlsDroppedBeforeStart
        }
        #expect(dropped == 0, "the ClientHello was dropped rather than kept")
        await shutdown(server, client)
    }

    /// A lite server that made its offer, and a client that answered it and started DTLS, before the
    /// server has that answer (returned); waits until the server kept the client's first DTLS.
    static func liteServerWithoutItsAnswer(_ name: String) async throws -> (
        server: PeerConnection, client: PeerConnection, answer: SessionDescription
    ) {
        let server = try PeerConnection(
            loop: EventLoop(name: name + "-server"), configuration: PeerConnectionConfiguration(iceLite: true))
        let client = try PeerConnection(loop: EventLoop(name: name + "-client"))
        await server.loop.submit { _ = server.addTransceiver(kind: .video, direction: .sendonly) }
        let answer = try await offerAndAnswer(offerer: server, answerer: client)
        // The client checks (the lite server answers from its own credentials) and starts DTLS.
        #expect(await IOTestSupport.wait(server.loop, seconds: 30) { server.counters.dtlsHeldUntilStart >= 1 })
        return (server, client, answer)
    }

    /// What a lite server keeps before its answer is bounded (four datagrams; the rest are dropped and
    /// counted), and junk among it from the checked address (not valid records) reaches the handshake
    /// without harm.
    @Test func theDTLSKeptBeforeTheAnswerIsBoundedAndGarbageInItIsHarmless() async throws {
        let (server, client, answer) = try await Self.liteServerWithoutItsAnswer("early-dtls-bound")
        guard let serverAddress = await server.loop.submit({ server.localAddress }) else {
            Issue.record("the server has no socket")
            return
        }
        // Eight DTLS-looking datagrams of junk from the client's own (checked) address.
        let junk = 8
        await client.loop.submit {
            guard let socket = client.transport.sockets.first else { return }
            for i in 0..<junk {
                let first = UInt8(20 + i % 4)  // the DTLS content types
                socket.send([first, 0xFE, 0xFD] + [UInt8](repeating: UInt8(i), count: 3 + i * 37), to: serverAddress)
            }
        }
        // Every datagram is either kept (at most four) or dropped and counted; the client's own
        // retransmissions may add to either.
        #expect(
            await IOTestSupport.wait(server.loop, seconds: 30) {
                server.counters.dtlsHeldUntilStart + server.counters.dtlsDroppedBeforeStart >= UInt64(1 + junk)
            })
        let (held, kept) = await server.loop.submit {
            (server.counters.dtlsHeldUntilStart, server.transport.dtlsBeforeStart.count)
        }
        #expect(held == UInt64(MediaTransport.dtlsBeforeStartLimit))
        #expect(kept == MediaTransport.dtlsBeforeStartLimit)
        // The answer hands what was kept (the ClientHello and junk) to DTLS: it connects all the same.
        try await server.loop.submit { try server.setRemoteDescription(answer, type: .answer) }
        try await server.waitUntilConnected(timeout: 30)
        try await client.waitUntilConnected(timeout: 30)
        #expect(await server.loop.submit { server.transport.dtlsBeforeStart.isEmpty })
        await shutdown(server, client)
    }

    @Test func wrongFingerprintFailsTheConnection() async throws {
        let tx = try PeerConnection(loop: EventLoop(name: "fp-tx"))
        let rx = try PeerConnection(loop: EventLoop(name: "fp-rx"))
        await tx.loop.submit { _ = tx.addTransceiver(kind: .video, direction: .sendonly) }
        let genuine = try await offerAndAnswer(offerer: tx, answerer: rx)
        // Tamper with the answer's certificate fingerprint.
        let forged = String(repeating: "AB:", count: 31) + "AB"
        let answer = try SessionDescription.parse(
            genuine.serialize().replacingOccurrences(
                of: #"a=fingerprint:sha-256 [0-9A-F:]+"#, with: "a=fingerprint:sha-256 \(forged)",
                options: .regularExpression))
        try await tx.loop.submit { try tx.setRemoteDescription(answer, type: .answer) }
        await #expect(throws: (any Error).self) { try await tx.waitUntilConnected(timeout: 8) }
        let reason = await tx.loop.submit { tx.failureReason ?? "" }
        #expect(reason.contains("DTLS"))
        await shutdown(tx, rx)
    }

    /// `waitUntilConnected` ends with the state change that decides it (closing the connection
    /// mid-wait throws `.closed`), and with a typed timeout error when nothing happens.
    @Test func waitingForTheConnectionEndsOnCloseOrTimeout() async throws {
        let pc = try PeerConnection(loop: EventLoop(name: "wait-pc"))
        await pc.loop.submit { _ = pc.addTransceiver(kind: .audio, direction: .sendonly) }
        do {
            try await pc.waitUntilConnected(timeout: 0.2)
            Issue.record("an unanswered connection connected")
        } catch {
            guard case .invalidState(let why) = error else { throw error }
            #expect(why.contains("timed out"), "\(why)")
        }
        let waiting = Task { () -> PeerConnectionError? in
            do { try await pc.waitUntilConnected(timeout: 60) } catch let e as PeerConnectionError { return e } catch {}
            return nil
        }
        try await Task.sleep(nanoseconds: 200_000_000)
        pc.loop.execute { pc.close() }
        #expect(await waiting.value == PeerConnectionError.closed)
        pc.loop.shutdown()
    }
}

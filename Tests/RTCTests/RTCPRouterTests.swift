import Foundation
import RTCWire
import TestSupport
import Testing

@testable import RTC

/// RTCP feedback through the path production uses: a connection's ``PeerConnection/handleRTCP(_:now:)``
/// (what every decrypted RTCP datagram reaches) and its one ``RTCPRouter``.
private struct NoSender: Error {}

@Suite("RTCP router")
struct RTCPRouterTests {
    /// A negotiated sending connection (no sockets needed: RTCP is handed in decrypted).
    func sendingConnection(_ name: String) async throws -> (PeerConnection, PeerConnection) {
        let tx = try PeerConnection(loop: EventLoop(name: "\(name)-tx"))
        let rx = try PeerConnection(loop: EventLoop(name: "\(name)-rx"))
        _ = await tx.loop.submit { tx.addTransceiver(kind: .video, direction: .sendonly) }
        try await negotiate(offerer: tx, answerer: rx)
        return (tx, rx)
    }

    /// Before the router, the connection turned every FIR into a PLI: a repeated FIR (same sequence
    /// number, RFC 5104 §4.3.1.1) asked the publisher for another key frame and counted as a PLI.
    @Test func aRepeatedFIRIsOneRequestOnTheLivePath() async throws {
        let (tx, rx) = try await sendingConnection("fir")
        defer {
            tx.loop.shutdown()
            rx.loop.shutdown()
        }
        let (requests, firs, plis) = try await tx.loop.submit { () throws -> (Int, UInt64, UInt64) in
            guard let sender = tx.transceivers.first?.senders.first else { throw NoSender() }
            var requests = 0
            tx.onKeyframeRequest = { _ in requests += 1 }
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256, alignment: 8)
            defer { buffer.deallocate() }
            var end = try RTCPWriter.writeReceiverReport(into: buffer, at: 0, ssrc: 9, reports: [])
            for seq: UInt8 in [1, 1, 2] {
                end = try RTCPWriter.writeFIR(
                    into: buffer, at: end, senderSSRC: 9, mediaSSRC: sender.ssrc, sequenceNumber: seq)
            }
            end = try RTCPWriter.writePLI(into: buffer, at: end, senderSSRC: 9, mediaSSRC: sender.ssrc)
            // A FIR for another SSRC is not ours.
            end = try RTCPWriter.writeFIR(
                into: buffer, at: end, senderSSRC: 9, mediaSSRC: sender.ssrc &+ 1, sequenceNumber: 3)
            tx.transport.handleRTCP(UnsafeRawBufferPointer(rebasing: buffer[0..<end]), now: EventLoop.now())
            // The same FIR sequence number again, in a later compound: still the same request.
            end = try RTCPWriter.writeFIR(into: buffer, at: 0, senderSSRC: 9, mediaSSRC: sender.ssrc, sequenceNumber: 2)
            tx.transport.handleRTCP(UnsafeRawBufferPointer(rebasing: buffer[0..<end]), now: EventLoop.now())
            return (requests, sender.stats.firsReceived, sender.stats.plisReceived)
        }
        #expect(firs == 2, "FIR 1 and FIR 2; the repeats are the same requests")
        #expect(plis == 1)
        #expect(requests == 3, "two FIRs and one PLI reach the owner")
    }

    /// A BYE names each of its sources to the connection's ``PeerConnection/onBYE``; one whose
    /// source count runs past its length is dropped and counted as malformed.
    @Test func aBYEReachesTheOwnerOncePerSource() async throws {
        let (tx, rx) = try await sendingConnection("bye")
        defer {
            tx.loop.shutdown()
            rx.loop.shutdown()
        }
        let (gone, malformed) = try await rx.loop.submit { () throws -> ([UInt32], UInt64) in
            var gone: [UInt32] = []
            rx.onBYE = { gone.append($0) }
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256, alignment: 8)
            defer { buffer.deallocate() }
            var end = try RTCPWriter.writeReceiverReport(into: buffer, at: 0, ssrc: 7)
            end = try RTCPWriter.writeBYE(into: buffer, at: end, ssrcs: [7, 8, 9], reason: "closing")
            rx.transport.handleRTCP(UnsafeRawBufferPointer(rebasing: buffer[0..<end]), now: EventLoop.now())
            let before = rx.counters.droppedMalformed
            // A BYE claiming 3 sources with room for one.
            end = try RTCPWriter.writeReceiverReport(into: buffer, at: 0, ssrc: 7)
            let bye = end
            end = try RTCPWriter.writeBYE(into: buffer, at: end, ssrcs: [10])
            buffer[bye] = (buffer[bye] & 0xE0) | 3
            rx.transport.handleRTCP(UnsafeRawBufferPointer(rebasing: buffer[0..<end]), now: EventLoop.now())
            return (gone, rx.counters.droppedMalformed - before)
        }
        #expect(gone == [7, 8, 9])
        #expect(malformed == 1)
    }

    /// NACKs reach the owner's handler when it answers them itself (an SFU), with every lost number.
    @Test func nacksGoToTheOwnerWhenItAnswersThem() async throws {
        let (tx, rx) = try await sendingConnection("nack")
        defer {
            tx.loop.shutdown()
            rx.loop.shutdown()
        }
        let (lost, counted) = try await tx.loop.submit { () throws -> ([UInt16], UInt64) in
            guard let sender = tx.transceivers.first?.senders.first else { throw NoSender() }
            var lost: [UInt16] = []
            tx.onNACK = { _, numbers, _ in lost += numbers }
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256, alignment: 8)
            defer { buffer.deallocate() }
            var end = try RTCPWriter.writeReceiverReport(into: buffer, at: 0, ssrc: 9, reports: [])
            end = try RTCPWriter.writeNACK(
                into: buffer, at: end, senderSSRC: 9, mediaSSRC: sender.ssrc, lostSequenceNumbers: [UInt16(10), 11, 40])
            tx.transport.handleRTCP(UnsafeRawBufferPointer(rebasing: buffer[0..<end]), now: EventLoop.now())
            return (lost, sender.stats.nacksReceived)
        }
        #expect(lost == [10, 11, 40])
        #expect(counted == 1)
    }
}

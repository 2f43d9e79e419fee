import Foundation
import RTCWire
import TestSupport
import Testing

@testable import RTC

/// The DTLS role of an ICE-lite server that answers (`a=setup:active`, as the SFU answers a publish
/// offer): it starts the handshake on the check that selects its pair, so a full client is
/// connected after two round trips instead of three; roles the peer asks for are honoured, and a
/// later offer keeps the role already in use.
@Suite(.serialized) struct DTLSRoleTests {
    /// Wraps a client's socket handler and counts the round trips it waits for: an arrival that
    /// follows something the client sent since the previous arrival starts a new one. Records the
    /// round trip during which DTLS connected. Loop thread only.
    final class RoundTripTap: DatagramHandler, @unchecked Sendable {
        let inner: MediaTransport
        let socket: UDPSocket
        private var sentAtLastArrival: UInt64 = 0
        private(set) var roundTrips = 0
        private(set) var connectedAfter: Int?
        /// DTLS datagrams that arrived in each round trip (index 0: the first).
        private(set) var dtlsByRoundTrip: [Int] = []
        /// STUN success responses still to lose on their way in (a lost answer to a check).
        var responsesToLose = 0

        init(inner: MediaTransport, socket: UDPSocket) {
            self.inner = inner
            self.socket = socket
        }

        func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket) {
            handleDatagram(data, from: from, socket: socket, now: EventLoop.now())
        }

        func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket, now: UInt64)
        {
            // The loop counts a datagram as sent when it flushes its batch, which it does before it
            // reads the next one.
            if responsesToLose > 0, data.count > 20, data[0] == 0x01, data[1] == 0x01 {
                responsesToLose -= 1
                return
            }
            if self.socket.packetsSent != sentAtLastArrival {
                roundTrips += 1
                sentAtLastArrival = self.socket.packetsSent
                dtlsByRoundTrip.append(0)
            }
            if let first = data.first, DTLSTransport.isDTLS(first), !dtlsByRoundTrip.isEmpty {
                dtlsByRoundTrip[dtlsByRoundTrip.count - 1] += 1
            }
            inner.handleDatagram(data, from: from, socket: socket, now: now)
            if connectedAfter == nil, inner.srtpOut != nil { connectedAfter = roundTrips }
        }
    }

    /// A full client offers (`actpass`) to a lite server that answers with `role`; returns both and
    /// the tap on the client's socket, connected.
    static func connect(serverRole: DTLSTransport.Role, name: String, losingResponses: Int = 0) async throws -> (
        server: PeerConnection, client: PeerConnection, tap: RoundTripTap, answer: SessionDescription
    ) {
        let server = try PeerConnection(
            loop: EventLoop(name: name + "-server"),
            configuration: PeerConnectionConfiguration(iceLite: true, answerDTLSRole: serverRole))
        let client = try PeerConnection(loop: EventLoop(name: name + "-client"))
        let tap = try await client.loop.submit { () throws -> RoundTripTap in
            try client.bindSockets()
            _ = client.addTransceiver(kind: .video, direction: .sendonly)
            guard let socket = client.transport.sockets.first else { throw PeerConnectionError.closed }
            let tap = RoundTripTap(inner: client.transport, socket: socket)
            tap.responsesToLose = losingResponses
            socket.handler = tap
            return tap
        }
        let answer = try await offerAndAnswer(offerer: client, answerer: server)
        try await client.loop.submit { try client.setRemoteDescription(answer, type: .answer) }
        try await client.waitUntilConnected(timeout: 30)
        try await server.waitUntilConnected(timeout: 30)
        return (server, client, tap, answer)
    }

    /// Answering `active`, the lite server sends its ClientHello right behind the response to the
    /// client's nominating check: the client receives it in its first round trip and is connected
    /// at the end of its second. Answering `passive` (the SFU before) the client starts DTLS only
    /// once its check is answered: three round trips. The count is the client's own, not a time.
    @Test(arguments: [(DTLSTransport.Role.client, 2), (.server, 3)])
    func aLiteServerThatAnswersActiveConnectsTheClientInTwoRoundTrips(
        serverRole: DTLSTransport.Role, expectedRoundTrips: Int
    ) async throws {
        let (server, client, tap, answer) = try await Self.connect(
            serverRole: serverRole, name: "rt-\(serverRole)")
        let setup = serverRole == .client ? "a=setup:active" : "a=setup:passive"
        #expect(answer.serialize().contains(setup), "answer: \(answer.serialize())")
        let (after, dtls, clientRole) = await client.loop.submit {
            (tap.connectedAfter, tap.dtlsByRoundTrip, client.dtlsRole)
        }
        #expect(clientRole == (serverRole == .client ? .server : .client))
        #expect(after == expectedRoundTrips, "DTLS datagrams per round trip: \(dtls)")
        if serverRole == .client {
            #expect(dtls.first ?? 0 >= 1, "the ClientHello came with the check's response: \(dtls)")
        }
        let serverRoleUsed = await server.loop.submit { server.transport.dtls?.role }
        #expect(serverRoleUsed == serverRole)
        await shutdown(client, server)
    }

    /// The response to the client's nominating check is lost, but the ClientHello the lite server
    /// sent right behind it arrives: the client keeps it (from an address it checked) until its
    /// retransmitted check is answered, then hands it to its handshake rather than dropping it.
    @Test func aClientHelloThatOutlivesTheLostResponseIsKeptUntilTheAddressIsValid() async throws {
        let (server, client, _, _) = try await Self.connect(serverRole: .client, name: "rt-lost", losingResponses: 1)
        let counters = await client.loop.submit { client.counters }
        #expect(counters.dtlsHeldUntilValid >= 1, "the ClientHello was not kept: \(counters)")
        #expect(counters.droppedUnknownAddress == 0, "DTLS was dropped: \(counters)")
        await shutdown(client, server)
    }

    /// A peer that asks for a role in its offer gets it, whatever the server would choose for
    /// `actpass`: `setup:active` makes the server passive, `setup:passive` makes it active.
    @Test(arguments: [("active", "passive"), ("passive", "active")])
    func anOfferThatNamesARoleGetsIt(offered: String, answered: String) async throws {
        let server = try PeerConnection(
            loop: EventLoop(name: "named-\(offered)-server"),
            configuration: PeerConnectionConfiguration(iceLite: true, answerDTLSRole: .client))
        let client = try PeerConnection(loop: EventLoop(name: "named-\(offered)-client"))
        let offer = try await client.loop.submit {
            _ = client.addTransceiver(kind: .video, direction: .sendonly)
            let o = try client.createOffer()
            try client.setLocalDescription(o)
            return try SessionDescription.parse(
                o.serialize().replacingOccurrences(of: "a=setup:actpass", with: "a=setup:\(offered)"))
        }
        let answer = try await server.loop.submit {
            try server.setRemoteDescription(offer, type: .offer)
            let a = try server.createAnswer()
            try server.setLocalDescription(a)
            return a
        }
        #expect(answer.serialize().contains("a=setup:\(answered)"), "answer: \(answer.serialize())")
        try await client.loop.submit { try client.setRemoteDescription(answer, type: .answer) }
        try await client.waitUntilConnected(timeout: 30)
        try await server.waitUntilConnected(timeout: 30)
        await shutdown(client, server)
    }

    /// RFC 8842 §5.5: an answer to a later offer keeps the DTLS role in use. A lite server that
    /// offered (and so is the DTLS server) and then answers the client's own `actpass` offer on
    /// the same connection stays passive, though it would answer a first offer `active`; and the
    /// client that was the DTLS server on a connection it offered on stays so when it answers.
    @Test func aLaterOfferKeepsTheRoleInUse() async throws {
        let server = try PeerConnection(
            loop: EventLoop(name: "keep-server"),
            configuration: PeerConnectionConfiguration(iceLite: true, answerDTLSRole: .client))
        let client = try PeerConnection(loop: EventLoop(name: "keep-client"))
        await server.loop.submit { _ = server.addTransceiver(kind: .video, direction: .sendonly) }
        let first = try await offerAndAnswer(offerer: server, answerer: client)
        #expect(first.serialize().contains("a=setup:active"))
        try await server.loop.submit { try server.setRemoteDescription(first, type: .answer) }
        try await client.waitUntilConnected(timeout: 30)
        try await server.waitUntilConnected(timeout: 30)

        // The client offers now: the server must answer passive (it is the DTLS server).
        let second = try await offerAndAnswer(offerer: client, answerer: server)
        #expect(second.serialize().contains("a=setup:passive"), "answer: \(second.serialize())")
        try await client.loop.submit { try client.setRemoteDescription(second, type: .answer) }
        let roles = await (server.loop.submit { server.dtlsRole }, client.loop.submit { client.dtlsRole })
        #expect(roles.0 == .server && roles.1 == .client, "roles: \(roles)")
        #expect(await client.loop.submit { client.state == .connected })
        await shutdown(client, server)
    }

    /// The other way round: a client that offered and became the DTLS server (the lite server
    /// answered `active`) answers a later `actpass` offer from that server `passive`, not with the
    /// `active` it would take on a first one.
    @Test func anOffererThatBecameTheServerKeepsItsRoleWhenItAnswers() async throws {
        let (server, client, _, _) = try await Self.connect(serverRole: .client, name: "keep-offerer")
        let reoffer = try await offerAndAnswer(offerer: server, answerer: client)
        #expect(reoffer.serialize().contains("a=setup:passive"), "answer: \(reoffer.serialize())")
        try await server.loop.submit { try server.setRemoteDescription(reoffer, type: .answer) }
        let roles = await (server.loop.submit { server.dtlsRole }, client.loop.submit { client.dtlsRole })
        #expect(roles.0 == .client && roles.1 == .server, "roles: \(roles)")
        #expect(await server.loop.submit { server.state == .connected })
        await shutdown(client, server)
    }
}

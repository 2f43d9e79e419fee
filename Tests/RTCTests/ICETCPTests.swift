import Foundation
import Glibc
import RTCWire
import TestSupport
import Testing

@testable import RTC

/// ICE-TCP between a client PeerConnection and an ICE-lite server behind a `UDPPortMux` with its
/// TCP listener, over loopback: the client's UDP receive path drops everything, so only the TCP
/// pair can succeed.
@Suite("ICE-TCP", .serialized)
struct ICETCPTests {
    @Test func mediaFlowsOverICETCPWhenUDPIsCut() async throws {
        let serverLoop = EventLoop(name: "icetcp-server")
        let mux = try await serverLoop.submit { () throws -> UDPPortMux in
            try UDPPortMux(loop: serverLoop, bindTo: SocketAddress(ip: "127.0.0.1", port: 0)!, iceTCP: true)
        }
        // As the SFU answers a publish offer: `active`, so the server's ClientHello goes over the
        // TCP pair its check selected (the restart test below keeps the passive role).
        var serverConfiguration = PeerConnectionConfiguration(
            iceLite: true, answerDTLSRole: .client, portMux: mux)
        serverConfiguration.senderHistory = false
        let server = try PeerConnection(loop: serverLoop, configuration: serverConfiguration)
        let client = try PeerConnection(loop: EventLoop(name: "icetcp-client"))
        let frames = ICERestartTests.FrameCounter()
        await serverLoop.submit { server.onFrame = { _, _, _, _ in frames.add() } }
        let video = try await client.loop.submit { () throws -> RTPTransceiver in
            try client.bindSockets()
            client.setImpairment(Impairment(receiveDropRate: 1))
            return client.addTransceiver(kind: .video, direction: .sendonly)
        }
        let offer = try await client.loop.submit {
            let o = try client.createOffer()
            try client.setLocalDescription(o)
            return o
        }
        let answer = try await serverLoop.submit {
            try server.bindSockets()
            try server.setRemoteDescription(offer, type: .offer)
            let a = try server.createAnswer()
            try server.setLocalDescription(a)
            return a
        }
        let text = answer.serialize()
        #expect(text.contains(" tcp ") && text.contains("tcptype passive"), "answer: \(text)")
        try await client.loop.submit { try client.setRemoteDescription(answer, type: .answer) }
        try await client.waitUntilConnected(timeout: 20)
        #expect(await client.loop.submit { client.isUsingICETCP })
        #expect(await serverLoop.submit { server.isUsingICETCP })
        await ICERestartTests.send(30, on: client, video, from: 0)
        #expect(await ICERestartTests.eventually { frames.count >= 25 }, "frames over ICE-TCP: \(frames.count)")

        // An ICE restart checks the TCP pair again with the new credentials (UDP is still cut).
        let clientFresh = try await client.loop.submit { try client.restartICE() }
        let serverFresh = try await serverLoop.submit { try server.restartICE() }
        try await client.loop.submit {
            try client.setRemoteICECredentials(ufrag: serverFresh.ufrag, password: serverFresh.password)
        }
        try await serverLoop.submit {
            try server.setRemoteICECredentials(ufrag: clientFresh.ufrag, password: clientFresh.password)
        }
        #expect(await ICERestartTests.eventually { await client.loop.submit { client.isFullyConnected } })
        #expect(await client.loop.submit { client.isUsingICETCP })
        let before = frames.count
        await ICERestartTests.send(10, on: client, video, from: 30)
        #expect(await ICERestartTests.eventually { frames.count >= before + 8 }, "after restart: \(frames.count)")
        await shutdown(client)
        await serverLoop.submit {
            server.close()
            mux.close()
        }
        serverLoop.shutdown()
    }

    @Test func aRestartMovesToICETCPWhenUDPStopsWorking() async throws {
        let serverLoop = EventLoop(name: "icetcp-restart-server")
        let mux = try await serverLoop.submit { () throws -> UDPPortMux in
            try UDPPortMux(loop: serverLoop, bindTo: SocketAddress(ip: "127.0.0.1", port: 0)!, iceTCP: true)
        }
        var serverConfiguration = PeerConnectionConfiguration(iceLite: true, answerDTLSRole: .server, portMux: mux)
        serverConfiguration.senderHistory = false
        let server = try PeerConnection(loop: serverLoop, configuration: serverConfiguration)
        var clientConfiguration = PeerConnectionConfiguration()
        clientConfiguration.iceTimeouts.consentInterval = 200_000_000
        clientConfiguration.iceTimeouts.disconnectedAfter = 700_000_000
        let client = try PeerConnection(
            loop: EventLoop(name: "icetcp-restart-client"), configuration: clientConfiguration)
        let frames = ICERestartTests.FrameCounter()
        await serverLoop.submit { server.onFrame = { _, _, _, _ in frames.add() } }
        let video = await client.loop.submit { client.addTransceiver(kind: .video, direction: .sendonly) }
        let offer = try await client.loop.submit {
            let o = try client.createOffer()
            try client.setLocalDescription(o)
            return o
        }
        let answer = try await serverLoop.submit {
            try server.bindSockets()
            try server.setRemoteDescription(offer, type: .offer)
            let a = try server.createAnswer()
            try server.setLocalDescription(a)
            return a
        }
        try await client.loop.submit { try client.setRemoteDescription(answer, type: .answer) }
        try await client.waitUntilConnected(timeout: 20)
        // UDP works, so UDP is selected (it has the higher priority).
        #expect(await !client.loop.submit { client.isUsingICETCP })

        // UDP dies both ways; the client notices and restarts: only the TCP pair can answer now.
        await client.loop.submit { client.setImpairment(Impairment(receiveDropRate: 1)) }
        await serverLoop.submit { mux.socket?.impairment = Impairment(receiveDropRate: 1) }
        #expect(await ICERestartTests.eventually { await client.loop.submit { client.state == .disconnected } })
        let clientFresh = try await client.loop.submit { try client.restartICE() }
        let serverFresh = try await serverLoop.submit { try server.restartICE() }
        try await client.loop.submit {
            try client.setRemoteICECredentials(ufrag: serverFresh.ufrag, password: serverFresh.password)
        }
        try await serverLoop.submit {
            try server.setRemoteICECredentials(ufrag: clientFresh.ufrag, password: clientFresh.password)
        }
        #expect(await ICERestartTests.eventually { await client.loop.submit { client.isFullyConnected } })
        #expect(await client.loop.submit { client.isUsingICETCP })
        await ICERestartTests.send(20, on: client, video, from: 0)
        #expect(await ICERestartTests.eventually { frames.count >= 15 }, "frames after the move: \(frames.count)")
        await shutdown(client)
        await serverLoop.submit {
            server.close()
            mux.close()
        }
        serverLoop.shutdown()
    }

    @Test func listenerClosesConnectionsThatAreNotICE() async throws {
        let loop = EventLoop(name: "icetcp-junk")
        let mux = try await loop.submit { () throws -> UDPPortMux in
            try UDPPortMux(loop: loop, bindTo: SocketAddress(ip: "127.0.0.1", port: 0)!, iceTCP: true)
        }
        let address = try #require(await loop.submit { mux.iceTCPListener?.localAddress })
        // A framed datagram that is not a STUN request naming a known ufrag.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { Glibc.close(fd) }
        #expect(address.withSockAddr { connect(fd, $0, $1) } == 0)
        let junk: [UInt8] = [0, 4, 0xDE, 0xAD, 0xBE, 0xEF]
        #expect(junk.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, 0) } == junk.count)
        // The server closes it: recv sees end of stream.
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var byte: UInt8 = 0
        #expect(recv(fd, &byte, 1, 0) == 0)
        #expect(await loop.submit { (mux.iceTCPListener?.refused ?? 0) >= 1 })
        #expect(await loop.submit { mux.iceTCPListener?.connectionCount } == 0)
        await loop.submit { mux.close() }
        loop.shutdown()
    }
}

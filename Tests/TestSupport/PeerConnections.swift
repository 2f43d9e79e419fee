import RTC
import RTCWire

/// A sending and a receiving ``PeerConnection``, each on an event loop of its own, negotiated
/// (the sender offers) and connected (ICE and DTLS done) on loopback.
public func connectedPair(
    sendVideo: Bool = true, sendAudio: Bool = true, configuration: PeerConnectionConfiguration = .init(),
    name: String = "test"
) async throws -> (tx: PeerConnection, rx: PeerConnection, video: RTPTransceiver?, audio: RTPTransceiver?) {
    let tx = try PeerConnection(loop: EventLoop(name: "\(name)-tx"), configuration: configuration)
    let rx = try PeerConnection(loop: EventLoop(name: "\(name)-rx"), configuration: configuration)
    let (video, audio) = await tx.loop.submit {
        (
            sendVideo ? tx.addTransceiver(kind: .video, direction: .sendonly) : nil,
            sendAudio ? tx.addTransceiver(kind: .audio, direction: .sendonly) : nil
        )
    }
    try await negotiate(offerer: tx, answerer: rx)
    try await tx.waitUntilConnected(timeout: 10)
    try await rx.waitUntilConnected(timeout: 10)
    return (tx, rx, video, audio)
}

/// One offer/answer exchange between two connections, each step on its connection's loop.
public func negotiate(offerer: PeerConnection, answerer: PeerConnection) async throws {
    let answer = try await offerAndAnswer(offerer: offerer, answerer: answerer)
    try await offerer.loop.submit { try offerer.setRemoteDescription(answer, type: .answer) }
}

/// The offerer's offer, set on both sides, and the answerer's answer, set on the answerer only: the
/// caller decides when (and whether, and in what form) the offerer gets it.
public func offerAndAnswer(offerer: PeerConnection, answerer: PeerConnection) async throws -> SessionDescription {
    let offer = try await offerer.loop.submit {
        let o = try offerer.createOffer()
        try offerer.setLocalDescription(o)
        return o
    }
    return try await answerer.loop.submit {
        try answerer.setRemoteDescription(offer, type: .offer)
        let a = try answerer.createAnswer()
        try answerer.setLocalDescription(a)
        return a
    }
}

/// Closes each connection on its loop, then stops the loop.
public func shutdown(_ connections: PeerConnection...) async {
    for pc in connections {
        await pc.loop.submit { pc.close() }
        pc.loop.shutdown()
    }
}

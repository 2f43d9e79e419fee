// These tests need the Streaming and Media modules (MediaPump, SyntheticMedia, Recording), which
// Package.swift lists as RoomServerTests dependencies.
#if canImport(Streaming) && canImport(Media)
    import Foundation
    import Testing

    import Streaming
    import Media
    import RTC
    import RTCWire
    @testable import SFU

    /// A Swift client connection on its own loop, as a browser would be: publishing or subscribing.
    final class SFUTestClient: @unchecked Sendable {
        let connection: PeerConnection
        var video: RTPTransceiver?
        var audio: RTPTransceiver?
        var pump: MediaPump?

        init(name: String) throws {
            connection = try PeerConnection(loop: EventLoop(name: name))
        }

        var loop: EventLoop { connection.loop }

        /// Publishes video (simulcast with `rids`) and audio into `sfu` and waits for the connection.
        func publish(to sfu: SFU, participantID: String, rids: [String] = [], audio wantAudio: Bool = true) async throws
            -> [ProducerInfo]
        {
            let pc = connection
            let offer = try await loop.submit { [self] in
                video = pc.addTransceiver(kind: .video, direction: .sendonly, sendRIDs: rids)
                if wantAudio { audio = pc.addTransceiver(kind: .audio, direction: .sendonly) }
                let o = try pc.createOffer()
                try pc.setLocalDescription(o)
                return o
            }
            let (answer, producers) = try await sfu.publish(participantID: participantID, offer: offer)
            try await loop.submit { try pc.setRemoteDescription(answer, type: .answer) }
            try await pc.waitUntilConnected(timeout: 10)
            return producers
        }

        /// Starts sending the shared synthetic loop.
        func startPump(layers: Int) async {
            let media = SyntheticMedia.shared(layers: layers)
            let pump = MediaPump(connection: connection, media: media, video: video, audio: audio)
            self.pump = pump
            await loop.submit { pump.attach() }
        }

        func stopPump() async {
            guard let pump else { return }
            await loop.submit { pump.detach() }
        }

        /// One subscribe round: the SFU offers, this client answers.
        func negotiateSubscription(with sfu: SFU, participantID: String) async throws {
            let offer = try await sfu.subscriberOffer(participantID: participantID)
            let pc = connection
            let answer = try await loop.submit {
                try pc.setRemoteDescription(offer, type: .offer)
                let a = try pc.createAnswer()
                try pc.setLocalDescription(a)
                return a
            }
            try await sfu.subscriberAnswer(participantID: participantID, answer: answer)
        }

        func close() async {
            let pc = connection
            await stopPump()
            await loop.submit { pc.close() }
            loop.shutdown()
        }
    }

    /// Thread-safe counters and frame log filled from a loop thread.
    final class SFUFrameLog: @unchecked Sendable {
        private let lock = NSLock()
        private var video = 0
        private var audio = 0
        private var renegotiations: [String] = []
        func add(_ kind: MediaKind) { lock.withLock { if kind == .video { video += 1 } else { audio += 1 } } }
        func renegotiate(_ id: String) { lock.withLock { renegotiations.append(id) } }
        var videoFrames: Int { lock.withLock { video } }
        var audioFrames: Int { lock.withLock { audio } }
        var renegotiationRequests: [String] { lock.withLock { renegotiations } }
    }

    func sfuTempPath(_ name: String) throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sfu-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir.appendingPathComponent(name).path
    }

    func sfuRunTool(_ path: String, _ args: [String]) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = args
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = pipe
        try p.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func sfuSleep(_ seconds: Double) async throws {
        try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
    }

#endif

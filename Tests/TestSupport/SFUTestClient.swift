import Foundation
import Media
import RTC
import RTCWire

/// One side of an SFU's client, as a browser's would be: a ``PeerConnection`` on an event loop of its
/// own, with the steps the SFU's and the room server's tests drive by hand (send-only transceivers
/// and their offer, the synthetic media pump, answering a subscribe offer, counting and recording
/// what arrives). How the offers and answers travel (straight to an `SFU`, or through the room
/// protocol) is the caller's.
public final class SFUTestClient: @unchecked Sendable {
    public let connection: PeerConnection
    /// The send-only transceivers ``makeSendOffer(video:rids:audio:)`` added.
    public private(set) var video: RTPTransceiver?
    public private(set) var audio: RTPTransceiver?
    /// Frames received since ``startReceiving()``.
    public let frames = SFUFrameLog()
    private var pump: MediaPump?
    /// Where received frames are also written (loop thread only).
    private var recording: Recording?

    public init(name: String) throws {
        connection = try PeerConnection(loop: EventLoop(name: name))
    }

    public var loop: EventLoop { connection.loop }

    /// Adds send-only transceivers (video with simulcast `rids` when given, audio) and returns the
    /// local offer, already set.
    public func makeSendOffer(video wantVideo: Bool = true, rids: [String] = [], audio wantAudio: Bool = true)
        async throws -> SessionDescription
    {
        let pc = connection
        return try await loop.submit { [self] in
            if wantVideo { video = pc.addTransceiver(kind: .video, direction: .sendonly, sendRIDs: rids) }
            if wantAudio { audio = pc.addTransceiver(kind: .audio, direction: .sendonly) }
            let o = try pc.createOffer()
            try pc.setLocalDescription(o)
            return o
        }
    }

    /// Applies the answer to our offer.
    public func accept(answer: SessionDescription) async throws {
        let pc = connection
        try await loop.submit { try pc.setRemoteDescription(answer, type: .answer) }
    }

    /// Answers a remote offer (a subscribe offer): sets it, creates and sets the answer, returns it.
    public func answer(_ offer: SessionDescription) async throws -> SessionDescription {
        let pc = connection
        return try await loop.submit {
            try pc.setRemoteDescription(offer, type: .offer)
            let a = try pc.createAnswer()
            try pc.setLocalDescription(a)
            return a
        }
    }

    /// Starts sending the shared synthetic loop (`layers` simulcast layers) on the send transceivers.
    public func startPump(layers: Int) async {
        let media = SyntheticMedia.shared(layers: layers)
        let pump = MediaPump(connection: connection, video: video, audio: audio, sources: media.source)
        self.pump = pump
        await loop.submit { pump.attach() }
    }

    public func stopPump() async {
        guard let pump else { return }
        await loop.submit { pump.detach() }
    }

    /// Counts every frame that arrives in ``frames`` and writes it to the recording set by
    /// ``record(_:)``, from now on.
    public func startReceiving() async {
        let pc = connection
        await loop.submit { [self] in
            pc.onFrame = { [self] transceiver, _, frame, timing in
                frames.add(transceiver.kind)
                recording?.write(frame, arrival: timing.arrivalTime)
            }
        }
    }

    /// Stops counting and recording what arrives.
    public func stopReceiving() async {
        let pc = connection
        await loop.submit { pc.onFrame = nil }
    }

    /// Records what arrives from now on (nil stops recording); needs ``startReceiving()``.
    public func record(_ r: Recording?) async {
        await loop.submit { [self] in recording = r }
    }

    /// Waits until ``frames`` reports at least the given counts.
    public func waitForFrames(video: Int = 0, audio: Int = 0, seconds: Double = 10) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while frames.videoFrames < video || frames.audioFrames < audio {
            if Date() > deadline {
                throw WaitTimeout(
                    what: "frames (video \(frames.videoFrames)/\(video), audio \(frames.audioFrames)/\(audio))")
            }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
    }

    /// Stops the pump, closes the connection and stops its loop.
    public func close() async {
        let pc = connection
        await stopPump()
        await loop.submit { pc.close() }
        loop.shutdown()
    }
}

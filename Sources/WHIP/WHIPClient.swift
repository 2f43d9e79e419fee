import Media
import RTC
import RTCWire
import Signaling

/// Where a sent track's media comes from.
public enum SourceChoice: Sendable, Equatable {
    /// The kind is not sent.
    case none
    /// The synthetic loop: the test pattern (video) or the tone (audio), with sync markers.
    case synthetic
    /// A file: IVF or WebM for video, Ogg Opus or WebM for audio.
    case file(String)
}

/// Publishes to a WHIP endpoint (RFC 9725) and plays from a WHEP endpoint.
///
/// Both follow the same resource model: POST the `application/sdp` offer with an optional bearer
/// token, read the `201 Created` answer and its `Location`, stream, then DELETE the resource.
public enum WHIPClient {
    /// The result of a finished session.
    public struct Summary: Sendable {
        /// Video frames sent (WHIP) or recorded (WHEP).
        public var videoFrames = 0
        /// Audio frames sent (WHIP) or recorded (WHEP).
        public var audioFrames = 0
        /// Video keyframes recorded (WHEP).
        public var keyframes = 0
        /// Sequence numbers this side asked the server to resend (NACK).
        public var nackSent = 0
        /// Keyframe requests this side sent (PLI).
        public var pliSent = 0
        /// Retransmitted packets received.
        public var retransmissionsReceived = 0
        /// NACKs received from the server.
        public var nackReceived = 0
        /// Packets resent on the server's request.
        public var retransmissionsSent = 0
        /// The negotiated SRTP protection profile (`none` if DTLS never completed).
        public var srtpProfile = ""
        /// Datagrams dropped because SRTP authentication or replay checks failed.
        public var droppedSRTP: UInt64 = 0
        /// Datagrams dropped because they came from an address ICE had not validated.
        public var droppedUnknownAddress: UInt64 = 0
        /// Whether the server confirmed the DELETE of the session's resource.
        public var resourceDeleted = false

        /// One line of `key=value` pairs for logs and tests.
        public var line: String {
            "video_frames=\(videoFrames) audio_frames=\(audioFrames) keyframes=\(keyframes) nack_sent=\(nackSent) "
                + "pli_sent=\(pliSent) retransmissions_received=\(retransmissionsReceived) "
                + "nack_received=\(nackReceived) retransmissions_sent=\(retransmissionsSent) "
                + "srtp=\(srtpProfile) dropped_srtp=\(droppedSRTP) dropped_unknown=\(droppedUnknownAddress) "
                + "deleted=\(resourceDeleted)"
        }
    }

    /// Waits `seconds`: how long a session streams unless the caller passes a wait that ends earlier
    /// (the CLI's returns at SIGINT/SIGTERM).
    public static func sleep(seconds: Double) async {
        try? await Task.sleep(nanoseconds: UInt64(max(0, seconds) * 1e9))
    }

    /// Publishes `video`/`audio` to the WHIP endpoint at `url` for `duration` seconds, or until
    /// `wait(duration)` returns.
    public static func publish(
        url: String, token: String?, video: SourceChoice, audio: SourceChoice, duration: Double,
        iceServers: [ICEServer] = [], log: @escaping @Sendable (String) -> Void = { _ in },
        wait: @Sendable (_ seconds: Double) async -> Void = WHIPClient.sleep
    ) async throws(WHIPError) -> Summary {
        let endpoint: HTTPURL
        do { endpoint = try HTTPURL(url) } catch { throw .badURL(url, cause: error) }
        if video == .none && audio == .none { throw .nothingToSend }
        // Files are read (and checked) before any network exchange, so a bad file fails fast.
        let videoSource: MediaSource?
        let audioSource: MediaSource?
        do {
            videoSource = try Self.source(video, kind: .video)
            audioSource = try Self.source(audio, kind: .audio)
        } catch {
            throw .source(error)
        }
        let sources = UncheckedSources(video: videoSource, audio: audioSource)
        let session = try await Session(endpoint: endpoint, token: token, iceServers: iceServers, log: log)
        defer { session.shutdown() }
        let pc = session.pc
        let pump: MediaPump
        pump = await pc.loop.submit {
            let v = video == .none ? nil : pc.addTransceiver(kind: .video, direction: .sendonly)
            let a = audio == .none ? nil : pc.addTransceiver(kind: .audio, direction: .sendonly)
            return MediaPump(
                connection: pc, video: v, videoSource: sources.video, audio: a, audioSource: sources.audio)
        }
        try await session.negotiate()
        await pc.loop.submit { pump.attach() }
        log("publishing for \(duration) s")
        await wait(duration)
        var summary = await pc.loop.submit {
            pump.close()
            return Self.summarize(pc)
        }
        summary.videoFrames = pump.videoFramesSent
        summary.audioFrames = pump.audioFramesSent
        summary.resourceDeleted = await session.deleteResource()
        return summary
    }

    /// The source for one kind: the synthetic loop, a file (IVF/WebM video, Ogg/WebM audio), or none.
    static func source(_ choice: SourceChoice, kind: MediaKind) throws(MediaSourceError) -> MediaSource? {
        switch choice {
        case .none: return nil
        case .synthetic:
            return try LocalSources.makeSource(kind: kind, layers: 1, video: .testPattern, audio: .tone)
        case .file(let path):
            return try LocalSources.makeSource(kind: kind, layers: 1, video: .file(path), audio: .file(path))
        }
    }

    /// Hands the sources to the loop thread, which owns them from then on.
    // Safe: hands the sources to the loop thread, which alone touches them from then on.
    struct UncheckedSources: @unchecked Sendable {
        let video: MediaSource?
        let audio: MediaSource?
    }

    /// Plays from the WHEP endpoint at `url` for `duration` seconds (or until `wait(duration)`
    /// returns), recording to `recordPath`.
    public static func play(
        url: String, token: String?, recordPath: String, duration: Double, iceServers: [ICEServer] = [],
        log: @escaping @Sendable (String) -> Void = { _ in },
        wait: @Sendable (_ seconds: Double) async -> Void = WHIPClient.sleep
    ) async throws(WHIPError) -> Summary {
        let endpoint: HTTPURL
        do { endpoint = try HTTPURL(url) } catch { throw .badURL(url, cause: error) }
        let recording: Recording
        do { recording = try Recording(path: recordPath) } catch { throw .recording(error) }
        // A write error (a full disk) is reported when it happens, not only at close.
        recording.observeDisk(
            DiskEvents(failed: { error, inFile in
                log("recording failed: \(error); it holds \(inFile.video) video, \(inFile.audio) audio frames")
            }))
        let session = try await Session(endpoint: endpoint, token: token, iceServers: iceServers, log: log)
        defer { session.shutdown() }
        let pc = session.pc
        await pc.loop.submit {
            pc.addTransceiver(kind: .audio, direction: .recvonly)
            pc.addTransceiver(kind: .video, direction: .recvonly)
            pc.onFrame = { _, _, frame, timing in recording.write(frame, arrival: timing.arrivalTime) }
        }
        do {
            try await session.negotiate()
        } catch {
            try? recording.close()
            throw error
        }
        log("recording to \(recordPath) for \(duration) s")
        await wait(duration)
        var summary = await pc.loop.submit {
            pc.onFrame = nil
            return Self.summarize(pc)
        }
        // Closed first: the counts are of what reached the file, and the last cluster reaches it at close.
        var closeError: RecordingError?
        do { try recording.close() } catch { closeError = error }
        summary.videoFrames = recording.videoFrames
        summary.audioFrames = recording.audioFrames
        summary.keyframes = recording.keyframes
        summary.resourceDeleted = await session.deleteResource()
        if let closeError { throw .recording(closeError) }
        if recording.writeErrors > 0 {
            throw .framesNotWritten(count: recording.writeErrors, path: recordPath, cause: recording.lastError)
        }
        return summary
    }

    static func summarize(_ pc: PeerConnection) -> Summary {
        var s = Summary()
        for r in pc.receiverStats() {
            s.nackSent += Int(r.stats.nackedSequenceNumbers)
            s.pliSent += Int(r.stats.plisSent)
            s.retransmissionsReceived += Int(r.stats.retransmissionsReceived)
        }
        for snd in pc.senderStats() {
            s.nackReceived += Int(snd.stats.nacksReceived)
            s.retransmissionsSent += Int(snd.stats.retransmissions)
        }
        s.srtpProfile = pc.srtpProfile.map { "\($0)" } ?? "none"
        s.droppedSRTP = pc.counters.droppedSRTP
        s.droppedUnknownAddress = pc.counters.droppedUnknownAddress
        return s
    }

    /// One WHIP/WHEP resource: the loop, the peer connection and the HTTP exchange.
    // Safe: its PeerConnection is touched on its loop only; the HTTP exchange runs on one task.
    final class Session: @unchecked Sendable {
        let endpoint: HTTPURL
        let token: String?
        let loop: EventLoop
        let pc: PeerConnection
        let log: @Sendable (String) -> Void
        var resource: HTTPURL?

        init(
            endpoint: HTTPURL, token: String?, iceServers: [ICEServer] = [], log: @escaping @Sendable (String) -> Void
        ) async throws(WHIPError) {
            self.endpoint = endpoint
            self.token = token
            self.log = log
            loop = EventLoop(name: "whip")
            var configuration = PeerConnectionConfiguration()
            configuration.iceServers = iceServers
            do { pc = try PeerConnection(loop: loop, configuration: configuration) } catch {
                loop.shutdown()
                throw .connection(cause: error)
            }
        }

        var headers: HTTPHeaders {
            var h = HTTPHeaders()
            if let token { h.add("Authorization", "Bearer \(token)") }
            return h
        }

        /// POSTs the offer, applies the answer and waits for ICE + DTLS.
        func negotiate() async throws(WHIPError) {
            let pc = self.pc
            let offer: SessionDescription
            await pc.gatherRelayCandidates()
            do {
                offer = try await pc.loop.submit {
                    let o = try pc.createOffer()
                    try pc.setLocalDescription(o)
                    return o
                }
            } catch { throw .badSDP(what: "offer", cause: error) }
            var h = headers
            h.add("Content-Type", "application/sdp")
            let response: HTTPResponse
            do {
                response = try await HTTPClient.request(
                    "POST", endpoint, headers: h, body: Array(offer.serialize().utf8))
            } catch { throw .http(cause: error) }
            guard response.status == 201 else {
                throw .rejected(status: response.status, reason: response.reason, body: response.text)
            }
            if let location = response.headers["Location"] {
                do { resource = try endpoint.resolving(location) } catch {
                    throw .badURL(location, cause: error)
                }
            } else {
                log("warning: 201 without a Location header; the session cannot be deleted")
            }
            let answer: SessionDescription
            do { answer = try SessionDescription.parse(response.text) } catch {
                throw .badSDP(what: "answer", cause: error)
            }
            do { try await pc.loop.submit { try pc.setRemoteDescription(answer, type: .answer) } } catch {
                throw .badSDP(what: "answer", cause: error)
            }
            do { try await pc.waitUntilConnected(timeout: 10) } catch { throw .connection(cause: error) }
            let profile = await pc.loop.submit { pc.srtpProfile.map { "\($0)" } ?? "" }
            log("connected (SRTP \(profile))")
        }

        /// DELETEs the resource; returns whether the server confirmed it.
        func deleteResource() async -> Bool {
            guard let resource else { return false }
            do {
                let r = try await HTTPClient.request("DELETE", resource, headers: headers, timeout: 5)
                return (200..<300).contains(r.status)
            } catch {
                log("warning: DELETE \(resource.target) failed: \(error)")
                return false
            }
        }

        func shutdown() {
            let pc = self.pc
            loop.execute { pc.close() }
            loop.shutdown()
        }
    }
}
